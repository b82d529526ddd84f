"""`kestrel models`: list, inspect, add, remove, download, search and set the models in Kestrel's library."""
