"""Unit tests, laid out as scheduler/ is: the test of scheduler/<package>/<module>.py is
tests/unit/<package>/test_<module>.py (several modules of one package: a name saying what
it covers), of a top-level module tests/unit/test_<module>.py; tests that cut across
packages stay at this level. The fakes and builders they share are in helpers/."""
