mod config_start;
mod crash;
mod filters_scripts;
mod inbox_cli;
mod ingress;
mod signatures;
mod support;
