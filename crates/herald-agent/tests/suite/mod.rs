mod turns;
