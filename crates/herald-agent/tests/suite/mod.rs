mod middleware_e2e;
mod turns;
