mod web;
