"""reftorch's spec tests: the op database, the oracle and plugin runners, API coverage."""
