"""The empirical privacy audit: statistical lower bounds on delta from runs of the mechanism."""
