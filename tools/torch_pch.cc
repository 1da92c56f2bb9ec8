// Owner of the precompiled <torch/torch.h> that the LibTorch targets reuse.
