"""shuffledp.clients: client processes that apply k-RR locally, onion-encrypt and send their
reports; see docs/architecture.md."""
