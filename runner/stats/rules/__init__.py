"""One module per rule of the decision, each with its test, its claims and bounds, and its advice."""
