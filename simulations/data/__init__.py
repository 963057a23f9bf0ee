"""Where the users' values come from: synthetic distributions and real check-ins (Gowalla)."""
