"""Planning above the rules: the n a design needs, its power, and simulation of the rules' promises."""
