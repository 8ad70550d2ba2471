"""Named tuples returned by ops with several results, printed as PyTorch prints them.

`reftorch.max(x, dim=0)` returns `return_types.max(values=..., indices=...)`: a tuple that
unpacks like one and also names its fields.
"""
from __future__ import annotations

_TYPES = {}


def _make(name, fields):
    def __new__(cls, values):
        values = tuple(values)
        if len(values) != len(fields):
            raise TypeError(f"torch.return_types.{name} takes a {len(fields)}-sequence "
                            f"({len(values)}-sequence given)")
        return tuple.__new__(cls, values)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"torch.return_types.{name}(\n{body})"

    namespace = {"__new__": __new__, "__repr__": __repr__, "__slots__": (),
                 "_fields": fields, "n_fields": len(fields), "n_sequence_fields": len(fields),
                 "__module__": "reftorch.return_types",
                 "__reduce__": lambda self: (type(self), (tuple(self),))}
    for i, f in enumerate(fields):
        namespace[f] = property(lambda self, i=i: tuple.__getitem__(self, i))
    cls = type(name, (tuple,), namespace)
    _TYPES[name] = cls
    globals()[name] = cls
    return cls


for _name in ("max", "min", "sort", "topk", "kthvalue", "mode", "median", "nanmedian",
              "cummax", "cummin", "aminmax"):
    for _suffix in ("", "_out"):  # an out= call returns the `<name>_out` type
        _make(_name + _suffix, ("min", "max") if _name == "aminmax" else ("values", "indices"))
for _name, _fields in (("slogdet", ("sign", "logabsdet")), ("qr", ("Q", "R")),
                       ("svd", ("U", "S", "V")), ("geqrf", ("a", "tau")),
                       ("histogram", ("hist", "bin_edges")), ("frexp", ("mantissa", "exponent")),
                       ("lu_unpack", ("P", "L", "U")), ("triangular_solve", ("solution",
                                                                             "cloned_coefficient")),
                       ("linalg_eigh", ("eigenvalues", "eigenvectors")),
                       ("linalg_eig", ("eigenvalues", "eigenvectors")),
                       ("linalg_slogdet", ("sign", "logabsdet")),
                       ("linalg_svd", ("U", "S", "Vh")), ("linalg_qr", ("Q", "R")),
                       ("solve", ("solution", "LU")), ("gels", ("solution", "QR")),
                       ("symeig", ("eigenvalues", "eigenvectors")),
                       ("eig", ("eigenvalues", "eigenvectors")), ("pstrf", ("u", "pivot")),
                       ("_lu_with_info", ("LU", "pivots", "info")),
                       ("linalg_lu_factor", ("LU", "pivots")), ("linalg_lu", ("P", "L", "U")),
                       ("linalg_lu_factor_ex", ("LU", "pivots", "info")),
                       ("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))):
    _make(_name, _fields)


def named(name, values):
    """The result `values` as `return_types.<name>`."""
    return _TYPES[name](values)
