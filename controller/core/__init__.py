"""The controller's pure core: the job registry and everything it decides with.

Nothing here does I/O or reads a clock: every event takes the time as an argument
(``now``) and returns the updates (``updates.py``) that the adapters beside this
package (``controller/driver.py``, ``api.py``, ``p4rt_client.py``, ``pbox_control.py``,
...) apply to the switches and PBoxes. tests/unit/test_controller_layers.py holds it
to that.
"""
