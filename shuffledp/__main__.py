import sys

from shuffledp.cli.main import forget_caught_interrupt, main

status = main()
forget_caught_interrupt()
sys.exit(status)
