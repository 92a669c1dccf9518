"""structgrad: structured matrices (UpperTriangular, Symmetric) with custom kernels and autograd.

The PyTorch operators live in :mod:`structgrad.torch`.
"""
