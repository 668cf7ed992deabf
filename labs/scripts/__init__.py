"""The lab scripts: each runs under torchrun or on a virtual cluster; ``launch`` starts them from a notebook."""
