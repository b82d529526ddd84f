"""The servers the person added as model sources: their list, their keys, their models, and the HTTP that reaches them.

Nothing here contacts a server on its own: a server is reached only when the person added it and
something asked (its models listed, a model loaded, an answer written), and `finding` looks at this
PC's usual ports only when called. The engine's remote backend (app/engine/backends/remote/) reads
the same list and keys, so a server no one added is never spoken to, whoever asks.
"""
