"""shuffledp.shuffler: see ../shared/DESIGN.md; built in a later issue."""
