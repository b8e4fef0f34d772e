"""A Kafka-protocol-aware TCP proxy between brokers and the controller.

Why: the KIP-903 race (docs/seeds.md#seed-000, steps 1-6) needs the leader's AlterPartition to arrive
*late* - after the added follower has been wiped and re-registered - while everything else
(heartbeats on the lifecycle channel, metadata, produce traffic) keeps flowing. Only a proxy
that understands request framing can hold one AlterPartition and nothing else. It decodes
request/response headers and AlterPartition (api 56) and BrokerRegistration (api 62)
bodies with ``kio``; every byte is forwarded unchanged, in order, per connection.

Modules: :mod:`.codec` (kio decoding), :mod:`.control` (control file and status),
:mod:`.server` (the asyncio proxy), ``python -m nemeses.proxy`` (the process).
"""
