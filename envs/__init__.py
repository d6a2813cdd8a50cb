"""Task worlds, installed as `mimojax.envs`.

Python run from the repo root also finds this folder as a top-level `envs`, a name other
packages may own; imported under that name, this file hands the name over to the next `envs`
on sys.path (or fails as if this folder were not there).
"""

if __name__ != "mimojax.envs":  # see mimojax/shadowing.py
    from mimojax.shadowing import hand_over

    hand_over(__name__, __file__)
