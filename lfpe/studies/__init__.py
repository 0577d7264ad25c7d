"""lfpe.studies: the controlled position-embedding studies (003, 000, 004) at small scale.

`sweep` turns one red-green configuration into a trainer config (all its seeds as one vmapped
program, `config.seeds`); `positions` reads the position part of a trained ViT.
"""
