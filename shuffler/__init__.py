"""shuffledp.shuffler: the mixnet-style cascade of hops (batch, peel one onion layer, permute,
forward), with its journal for crash recovery; see docs/architecture.md."""
