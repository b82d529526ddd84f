"""The engine's backends: one subpackage each, registered with what it loads and supports.

registry.py lists them (spec.py says what a registration holds); loading.py and resources.py are
what the local ones share: loading where placement says, threads, free memory.
"""
