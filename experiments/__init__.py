"""Experiments on an emulated rack, driven from the root namespace: the ``make run``
driver (``run``, with its training and all-reduce paths), launching and watching the
workers, CPU measurement, fault injection (chaos, stragglers) and the plots."""
