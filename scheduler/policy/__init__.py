"""Operator preemption policies: the PreemptionPolicy custom resource
(scheduling.kas.io/v1alpha1), watched on the scheduler's own connection and event loop.

- `spec`: an object read into a checked PolicySpec (PolicyError names the field);
- `rules`: how the applying policies combine for one preemptor (the evaluator's rules);
- `sync`: whether the view of the policies is known to be current (fail closed);
- `store`: the policies in force, counters and cooldown memory (PolicyStore);
- `status`: the leader's status writes (observedGeneration, Ready, counters);
- `watcher`: list+watch into the store (the project's Informer), restarted when it dies,
  with the CRD check that tells an operator's deletion from the CRD's;
- `runtime`: the above wired for one process, its tasks under the app's Supervisor.
"""
