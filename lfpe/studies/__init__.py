"""lfpe.studies: the controlled position-embedding studies (003, 000, 004) at small scale.

`multiseed` trains many seeds of one small model as one program; the study definitions
(red-green tasks, ablations) build on it.
"""
