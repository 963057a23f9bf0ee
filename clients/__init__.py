"""shuffledp.clients: client processes that apply k-RR locally, onion-encrypt and send their
reports; see README.md, "Architecture"."""
