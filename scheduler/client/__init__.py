"""The client layer: the only importer of kubernetes_asyncio.

- `connection`: one authenticated session, raw JSON requests and watch streams.
- `informer`: Informer[T] (LIST+WATCH into a store of records, handlers, 410 re-list).
- `http1`: the keep-alive HTTP/1.1 client of the writes (llhttp framing, size caps, a
  bounded pool with idle expiry and a liveness check before reuse).
- `dispatcher`: every write (bind, status patch, delete, event, lease) with QPS/burst,
  a concurrency bound, the lease fence and deadline, and safe retries (`retries`:
  client-go's rule of which failed calls may be sent again).
- `events`: EventRecorder, fire-and-forget events aggregated into series.
- `errors`: the error tree, chosen by HTTP status (no transport import);
  `error_translation`: the transport's exceptions mapped onto it.

Import from the modules themselves; the package re-exports nothing, so importing
`scheduler.client.errors` to catch an ApiError does not load aiohttp and kubernetes_asyncio
(the configuration check imports the plugin classes, which catch it, and must stay quick).
"""
