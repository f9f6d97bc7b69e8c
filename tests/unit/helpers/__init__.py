"""What the unit tests share: object builders, a fake clock, a scriptable framework,
preemption fakes, a scripted HTTP server, the serving tests' in-memory API server, and the
Go reference program of the go_sort test (go_sort/main.go). Helpers that integration,
fault, differential or end-to-end tests also use stay in tests/ itself."""
