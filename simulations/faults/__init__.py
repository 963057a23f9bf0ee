"""The fault bench (issue 13, "Checks"): each row of the issue's table run as a scenario against
real processes and Mosquitto, giving sent, counted, duplicates, lost (by place), exit status,
wall time and a verdict. ``bench/faults.py`` prints the table; docs/faults.md ("Fault bench")
says what each scenario does and how the verdict is given."""
