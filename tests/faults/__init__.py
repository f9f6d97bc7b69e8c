"""The fault suite: the scheduler, run as a real process against a real local control
plane, under the faults an operator's cluster meets (API server killed, watches expired,
leader paused, admission refusing, backlog, burst, churn) and fuzzed input. Each case
checks invariants from the API server's own state. `python -m tests.faults --help`;
docs/reliability.md."""
