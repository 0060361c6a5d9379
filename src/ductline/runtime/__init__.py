"""Workers: claiming, killable children, leases, recording outcomes, advancing runs."""
