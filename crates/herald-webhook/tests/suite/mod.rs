mod filter_props;
mod parse_props;
mod template_props;
mod verify_props;
