"""tsopt_torch — PyTorch modules into tsopt graphs: torch.export's ATen graph mapped onto tsopt's ops.

    python3 -m tsopt_torch.export MODULE.py:Class --args x=t:16,d:64 -o graph.yaml   (export.py: the CLI)
    from tsopt_torch.export import export_module                                         (the API)

graph.py builds the YAML graph (axes named by size, PyTorch's positional dims kept in order), aten.py is the
op table. Only this package needs torch; tsopt itself and its tests do not.
"""
