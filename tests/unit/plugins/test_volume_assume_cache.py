"""The assume cache's overlay: an assumed PV or PVC holds while the informer still has the
version it was derived from, and no longer."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.framework.handle import InMemoryListers
from scheduler.model.volume import ClaimRef, pv_from_dict, pvc_from_dict
from scheduler.plugins.volume_assume_cache import OutOfSyncError, VolumeAssumeCache


def _listers() -> InMemoryListers:
    ls = InMemoryListers()
    ls.set_pv(
        pv_from_dict(
            {
                "metadata": {"name": "pv1", "resourceVersion": "5"},
                "spec": {"storageClassName": "fast", "capacity": {"storage": "1Gi"}},
            }
        )
    )
    ls.set_pvc(
        pvc_from_dict(
            {
                "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "7"},
                "spec": {"storageClassName": "fast"},
            }
        )
    )
    return ls


def test_an_assumed_pv_is_read_until_the_informer_moves_on() -> None:
    ls = _listers()
    cache = VolumeAssumeCache(ls)
    api = ls.pvs["pv1"]
    assumed = dataclasses.replace(api, claim=ClaimRef("ns", "c1"))
    cache.assume_pv(assumed)
    assert cache.get_pv("pv1") is assumed
    assert cache.list_pvs("fast") == [assumed]
    assert cache.list_pvs("slow") == []
    assert cache.pv_api("pv1") is api
    assert cache.assumed_counts() == (1, 0)
    newer = dataclasses.replace(api, resource_version="6")
    ls.set_pv(newer)
    assert cache.get_pv("pv1") is newer
    assert cache.assumed_counts() == (0, 0)


def test_an_assumed_pvc_is_restored_only_by_its_own_version() -> None:
    ls = _listers()
    cache = VolumeAssumeCache(ls)
    api = ls.pvcs["ns/c1"]
    assumed = dataclasses.replace(api, annotations={"a": "b"})
    cache.assume_pvc(assumed)
    assert cache.get_pvc("ns", "c1") is assumed
    cache.restore_pvc(dataclasses.replace(api, resource_version="8"))
    assert cache.get_pvc("ns", "c1") is assumed
    cache.restore_pvc(api)
    assert cache.get_pvc("ns", "c1") is api


def test_assuming_a_stale_or_missing_object_fails() -> None:
    ls = _listers()
    cache = VolumeAssumeCache(ls)
    stale = dataclasses.replace(ls.pvs["pv1"], resource_version="4")
    with pytest.raises(OutOfSyncError, match=r'"pv1" is out of sync \(stored: 5, assume: 4\)'):
        cache.assume_pv(stale)
    gone = dataclasses.replace(ls.pvcs["ns/c1"], name="c2")
    with pytest.raises(OutOfSyncError, match='persistentvolumeclaim "c2" not found'):
        cache.assume_pvc(gone)


def test_a_deleted_pv_drops_its_assumption() -> None:
    ls = _listers()
    cache = VolumeAssumeCache(ls)
    cache.assume_pv(ls.pvs["pv1"])
    del ls.pvs["pv1"]
    assert cache.get_pv("pv1") is None
    ls.set_pv(pv_from_dict({"metadata": {"name": "pv1", "resourceVersion": "5"}}))
    assert cache.assumed_counts() == (0, 0)
