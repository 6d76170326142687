mod fake_provider;
mod props;
