"""The packed point batch and its curves: the batch, serialization, scan sequences, segment reductions, curve orders."""
