"""Stand-in arguments for functions that nothing calls (placeholder)."""


def drive_uncalled(plan, probe, namespace, source, filename, execute):
    return {}
