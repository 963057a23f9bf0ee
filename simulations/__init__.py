"""shuffledp.simulations: brokers, data sets, the multi-process launcher, streams, the empirical
audit and the experiments; see README.md and docs/."""
