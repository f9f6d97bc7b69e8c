"""Operator preemption policies: the PreemptionPolicy custom resource
(scheduling.kas.io/v1alpha1), reconciled by kopf inside the scheduler's own event loop.

- `spec`: an object read into a checked PolicySpec (PolicyError names the field);
- `rules`: how the applying policies combine for one preemptor (the evaluator's rules);
- `store`: the policies in force, counters and cooldown memory (PolicyStore);
- `status`: the leader's status writes (observedGeneration, Ready, counters);
- `controller`: kopf, embedded as tasks of this loop. The only importer of kopf.

Importing this package does not import kopf; `scheduler.policy.controller` does.
"""
