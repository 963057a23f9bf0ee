"""Who may do what: stage keys (`keys`), broker accounts and ACLs (`access`), TLS (`tls`)."""
