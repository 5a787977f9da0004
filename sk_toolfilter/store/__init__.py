"""The shared tool index: tool records and versioned catalogs in a database, through Semantic
Kernel's vector-store collections (``index.store`` other than ``memory``)."""
