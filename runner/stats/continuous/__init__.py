"""Paired continuous scores: the betting test (Waudby-Smith & Ramdas 2024) where the scores' bounds are known, valid
at every n; the paired t-test (asymptotic, said so) where they are not; the advice sized by the betting test itself."""
