"""``dynamodb://table?region=…``: runs in one DynamoDB table, for AWS Lambda. Exact, with conditional writes.

Every write is one ``TransactWriteItems`` call: the run's item is written only if its
``version`` (a save) or its lease (an append) is what it was, *and* its ``seq`` is the one
the writer read, so the seqs of the events in the same transaction are minted atomically and
never repeat; journal entries are put only if absent. A writer whose seq was stale (another
process stored events meanwhile) reads the run again and retries; a lost compare-and-set or
lease is an error, as on every store. Each transaction carries a client request token, so
the SDK's retry of a write whose reply was lost is applied once, never twice.

Layout (one table, ``pk``/``sk`` strings): a run is ``run#{id}``/``run``; its journal
entries ``run#{id}``/``j#{key}``; the events of one write ``run#{id}``/``e#{last seq}``
(one item, split only past DynamoDB's 400 KB item limit); state ``state#{scope}``/``k#{key}``.
Two indexes: ``runs`` (newest first, for listing) and ``due`` (sparse, by ``due_at``, for the
sweep). A value too large for an item is refused with a clear error, never truncated.

Readers in other processes poll (DynamoDB has no notification a server can listen to).
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from .._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent
from ..errors import ItemTooLarge, LeaseLost, RunConflict, RunNotFound, StoreConfigError
from .protocol import TICK_MEMORY
from .rows import check_text, run_from_row, run_row, value_error
from .urls import options, unavailable

__all__ = ["DynamoDBStore"]
ITEM_LIMIT = 380_000
"""Bytes of values per item we write, under DynamoDB's 400 KB (names and keys take the rest)."""
_RETRIES = 60
_TRANSIENT = frozenset(
    {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "InternalServerError"}
)
"""Errors (after the SDK's own retries) that say "not now", not "never": the run is recovered later."""
_BUSY = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})
"""Cancellation reasons of a transaction that another try may pass."""


def _size(text: str) -> int:
    """Bytes, as DynamoDB counts them (UTF-8), not characters; text that is not valid Unicode is refused."""
    try:
        return len(text.encode())
    except UnicodeEncodeError as exc:
        raise value_error(exc) from None


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: float | int) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def _run_key(run_id: str) -> dict[str, Any]:
    return {"pk": _s(f"run#{run_id}"), "sk": _s("run")}


def _run_item(record: RunRecord, *, version: int, seq: int) -> dict[str, Any]:
    run_id, agent, thread_id, status, _, owner, expires, due_at, data = run_row(record)
    if _size(data) > ITEM_LIMIT:
        raise ItemTooLarge(f"run {run_id} is {_size(data):,} bytes of JSON, over DynamoDB's item limit")
    item = {
        **_run_key(run_id),
        "id": _s(run_id),
        "agent": _s(agent),
        "thread_id": _s(thread_id),
        "status": _s(status),
        "version": _n(version),
        "seq": _n(seq),
        "data": _s(data),
        "list_pk": _s("runs"),
    }
    if owner is not None:
        item["lease_owner"] = _s(owner)
    if expires is not None:
        item["lease_expires"] = _n(expires)
    if due_at is not None:
        item["due_at"], item["due_pk"] = _n(due_at), _s("due")
    return item


def _record(item: dict[str, Any]) -> RunRecord:
    def number(name: str) -> float | None:
        return float(item[name]["N"]) if name in item else None

    return run_from_row(
        (
            item["id"]["S"],
            item["agent"]["S"],
            item["thread_id"]["S"],
            item["status"]["S"],
            int(item["version"]["N"]),
            item["lease_owner"]["S"] if "lease_owner" in item else None,
            number("lease_expires"),
            number("due_at"),
            item["data"]["S"],
        )
    )


def _check_strings(value: Any) -> None:
    """Refuse a request whose text is not valid Unicode (a lone surrogate), before it is sent."""
    if isinstance(value, str):
        check_text(value)
    elif isinstance(value, dict):
        for item in value.values():
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


class DynamoDBStore:
    """``dynamodb://agent-unit-runs?region=eu-west-1`` (``&endpoint_url=…`` for a local emulator;
    ``&create=true`` creates the table when it is missing)."""

    def __init__(
        self, table: str, *, region: str | None = None, endpoint_url: str | None = None, create: bool = False
    ) -> None:
        import boto3
        from botocore.config import Config

        self.table = table
        self.url = f"dynamodb://{table}" + (f"?region={region}" if region else "")
        self._client = boto3.client(
            "dynamodb",
            region_name=region,
            endpoint_url=endpoint_url,
            config=Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=10),
        )
        self._create = create
        self._ready = False
        self._seqs: dict[str, int] = {}  # each run's last seq, as this process last saw it

    @classmethod
    def from_url(cls, url: str) -> DynamoDBStore:
        found = options("dynamodb", url, {"region": "REGION", "endpoint_url": "URL", "create": "true"})
        parts = urlsplit(url)
        if not parts.netloc:
            raise StoreConfigError(
                "invalid dynamodb store URL: it names no table; write dynamodb://TABLE?region=REGION "
                "(options: region, endpoint_url, create)"
            )
        return cls(
            parts.netloc,
            region=found.get("region"),
            endpoint_url=found.get("endpoint_url"),
            create=found.get("create", "").lower() in ("1", "true", "yes"),
        )

    # -- calls ------------------------------------------------------------------------------

    async def _call(self, operation: str, **params: Any) -> Any:
        """One SDK call in a worker thread (boto3 blocks); connection trouble as StoreUnavailable."""
        from botocore.exceptions import BotoCoreError, ClientError

        if not self._ready:
            await self._prepare()
        _check_strings(params)  # the SDK would send a lone surrogate escaped, and the service refuse it oddly
        try:
            return await asyncio.to_thread(getattr(self._client, operation), **params)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("ResourceNotFoundException", "UnrecognizedClientException", "AccessDeniedException"):
                raise unavailable("dynamodb", "cannot be used", url=self.url, detail=code) from None
            if code in _TRANSIENT or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
                raise unavailable("dynamodb", "is unavailable", url=self.url, detail=code) from None
            if code == "ValidationException":  # DynamoDB refused a value (too large, an empty key...)
                raise value_error(exc) from None
            raise
        except BotoCoreError as exc:
            raise unavailable("dynamodb", "cannot be reached", url=self.url, detail=repr(exc)) from None
        except UnicodeEncodeError as exc:
            raise value_error(exc) from None

    async def _prepare(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            await asyncio.to_thread(self._client.describe_table, TableName=self.table)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code != "ResourceNotFoundException":
                raise unavailable("dynamodb", "cannot be used", url=self.url, detail=code) from None
            if not self._create:
                raise unavailable(
                    "dynamodb",
                    "has no table of the name in its URL",
                    url=self.url,
                    detail=f"table {self.table!r} does not exist",
                    then="create it (agent-unit build --preset aws-lambda writes its template), "
                    "or add ?create=true to the store URL",
                ) from None
            await asyncio.to_thread(self._create_table)
        except BotoCoreError as exc:
            raise unavailable("dynamodb", "cannot be reached", url=self.url, detail=repr(exc)) from None
        self._ready = True

    def _create_table(self) -> None:
        self._client.create_table(
            TableName=self.table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": name, "AttributeType": kind}
                for name, kind in (("pk", "S"), ("sk", "S"), ("list_pk", "S"), ("id", "S"), ("due_pk", "S"))
            ]
            + [{"AttributeName": "due_at", "AttributeType": "N"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "runs",
                    "KeySchema": [
                        {"AttributeName": "list_pk", "KeyType": "HASH"},
                        {"AttributeName": "id", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": "due",
                    "KeySchema": [
                        {"AttributeName": "due_pk", "KeyType": "HASH"},
                        {"AttributeName": "due_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                },
            ],
        )
        self._client.get_waiter("table_exists").wait(TableName=self.table)

    async def check(self) -> None:
        """Reach the table now: a clear error at start (missing table, no credentials, no network)."""
        await self._prepare()

    async def _seq(self, run_id: str) -> int | None:
        """The run's last seq as this process knows it, read when unknown (None: no such run)."""
        if run_id not in self._seqs:
            found = await self._call("get_item", TableName=self.table, Key=_run_key(run_id), ConsistentRead=True)
            if "Item" not in found:
                return None
            if len(self._seqs) > 10_000:  # a hint per run this process touched: keep it bounded
                self._seqs.clear()
            self._seqs[run_id] = int(found["Item"]["seq"]["N"])
        return self._seqs[run_id]

    def _writes(
        self, run_id: str, journal: Sequence[JournalEntry], events: Sequence[str], seq: int
    ) -> list[dict[str, Any]]:
        """Puts of journal entries (only if absent) and of the events numbered after ``seq``."""
        items: list[dict[str, Any]] = []
        pk = _s(f"run#{run_id}")
        for entry in journal:
            item = {"pk": pk, "sk": _s(f"j#{entry.key}")}
            size = 0
            for name, value in (("value", entry.value), ("error", entry.error), ("meta", entry.meta)):
                if value is not None:
                    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                    item[name] = _s(text)
                    size += _size(text)
            if size > ITEM_LIMIT:
                raise ItemTooLarge(
                    f"journal entry {entry.key} of run {run_id} is {size:,} bytes, over DynamoDB's item limit: "
                    "keep max_step_bytes under 380 KB, or store large results elsewhere and journal their key"
                )
            items.append(
                {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
            )
        chunk: list[str] = []
        size = 0
        for number, data in enumerate(events, seq + 1):
            if _size(data) > ITEM_LIMIT:
                raise ItemTooLarge(f"an event of run {run_id} is {_size(data):,} bytes, over DynamoDB's item limit")
            if chunk and size + _size(data) > ITEM_LIMIT:
                items.append(self._event_item(pk, number - len(chunk), chunk))
                chunk, size = [], 0
            chunk.append(data)
            size += _size(data)
        if chunk:
            items.append(self._event_item(pk, seq + len(events) - len(chunk) + 1, chunk))
        return items

    def _event_item(self, pk: dict[str, str], first: int, chunk: list[str]) -> dict[str, Any]:
        last = first + len(chunk) - 1
        item = {"pk": pk, "sk": _s(f"e#{last:012d}"), "first": _n(first), "events": {"L": [_s(e) for e in chunk]}}
        return {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}

    async def _transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """Write ``items`` in one transaction; None, or the cancellation reason of each item."""
        from botocore.exceptions import ClientError

        if len(items) > 100:
            raise ItemTooLarge(f"one write of {len(items)} items is over DynamoDB's 100 per transaction")
        try:
            await self._call("transact_write_items", TransactItems=items, ClientRequestToken=uuid.uuid4().hex)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or [{"Code": "ConditionalCheckFailed"}]
            return [reason.get("Code", "None") for reason in reasons]
        return None

    async def _write_run(
        self,
        run_id: str,
        run_write: Callable[[int], dict[str, Any]],
        journal: Sequence[JournalEntry],
        events: Sequence[str],
        refused: Callable[[dict[str, Any] | None], Exception | None],
    ) -> int:
        """The run's own write (conditioned on its seq too) with its journal entries and events.

        ``refused(item)`` says why the run's condition failed (an error to raise), or None when
        only the seq moved: then read it again and retry.
        """
        for attempt in range(_RETRIES):
            if attempt:  # another writer won the seq: back off a random while, so racers spread out
                await asyncio.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
            seq = await self._seq(run_id)
            if seq is None:
                raise refused(None) or RunNotFound(f"run {run_id} does not exist")
            failed = await self._transact([run_write(seq), *self._writes(run_id, journal, events, seq)])
            if failed is None:
                self._seqs[run_id] = seq + len(events)
                return seq + len(events)
            if _BUSY & set(failed):  # another transaction on the run's item right now, or throttled
                self._seqs.pop(run_id, None)
                continue
            if failed[0] == "ConditionalCheckFailed":
                self._seqs.pop(run_id, None)
                found = await self._call("get_item", TableName=self.table, Key=_run_key(run_id), ConsistentRead=True)
                error = refused(found.get("Item"))
                if error is not None:
                    raise error
                continue  # only the seq moved: mint again
            taken = [
                entry.key for entry, code in zip(journal, failed[1:], strict=False) if code == "ConditionalCheckFailed"
            ]
            if taken:
                raise RunConflict(f"run {run_id} already has a journal entry for {', '.join(taken)}")
            raise unavailable("dynamodb", "refused the write", url=self.url, detail=", ".join(sorted(set(failed))))
        raise unavailable("dynamodb", "stayed busy", url=self.url, detail=f"run {run_id} had too many writers at once")

    # -- runs -------------------------------------------------------------------------------

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        item = _run_item(record, version=record.version, seq=len(events))
        put = {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
        failed = await self._transact([put, *self._writes(record.id, (), events, 0)])
        if failed is not None:
            raise RunConflict(f"run {record.id} already exists")
        self._seqs[record.id] = len(events)
        return len(events)

    async def load_run(self, run_id: str) -> RunRecord | None:
        found = await self._call("get_item", TableName=self.table, Key=_run_key(run_id), ConsistentRead=True)
        if "Item" not in found:
            return None
        self._seqs[run_id] = int(found["Item"]["seq"]["N"])
        return _record(found["Item"])

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        def write(seq: int) -> dict[str, Any]:
            item = _run_item(record, version=expected_version + 1, seq=seq + len(events))
            return {
                "Put": {
                    "TableName": self.table,
                    "Item": item,
                    "ConditionExpression": "version = :version AND seq = :seq",
                    "ExpressionAttributeValues": {":version": _n(expected_version), ":seq": _n(seq)},
                }
            }

        def refused(item: dict[str, Any] | None) -> Exception | None:
            if item is None:
                return RunNotFound(f"run {record.id} does not exist")
            if int(item["version"]["N"]) != expected_version:
                return RunConflict(f"run {record.id} was changed by someone else: read it again and retry")
            return None

        return await self._write_run(record.id, write, journal, events, refused)

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        def write(seq: int) -> dict[str, Any]:
            return {
                "Update": {
                    "TableName": self.table,
                    "Key": _run_key(run_id),
                    "UpdateExpression": "SET seq = :next",
                    "ConditionExpression": "lease_owner = :owner AND #status = :running AND seq = :seq",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {
                        ":owner": _s(owner),
                        ":running": _s("running"),
                        ":seq": _n(seq),
                        ":next": _n(seq + len(events)),
                    },
                }
            }

        def refused(item: dict[str, Any] | None) -> Exception | None:
            if item is None or item.get("lease_owner", {}).get("S") != owner or item["status"]["S"] != "running":
                return LeaseLost(f"run {run_id} is no longer held by this executor")
            return None

        return await self._write_run(run_id, write, journal, events, refused)

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        from botocore.exceptions import ClientError

        try:
            found = await self._call(
                "update_item",
                TableName=self.table,
                Key=_run_key(run_id),
                UpdateExpression="SET lease_expires = :expires, due_at = :expires, due_pk = :due ADD version :one",
                ConditionExpression="lease_owner = :owner AND #status = :running",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":owner": _s(owner),
                    ":running": _s("running"),
                    ":expires": _n(expires),
                    ":due": _s("due"),
                    ":one": _n(1),
                },
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise
        return int(found["Attributes"]["version"]["N"])

    async def _query(self, limit: int | None = None, **params: Any) -> list[dict[str, Any]]:
        """Every item a query matches (following its pages), up to ``limit``."""
        items: list[dict[str, Any]] = []
        while True:
            page = await self._call("query", TableName=self.table, **params)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page or (limit is not None and len(items) >= limit):
                return items
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]:
        items = await self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :journal)",
            ExpressionAttributeValues={":pk": _s(f"run#{run_id}"), ":journal": _s("j#")},
            ConsistentRead=True,
        )
        journal = {}
        for item in items:
            key = item["sk"]["S"][2:]
            journal[key] = JournalEntry(
                key,
                item["value"]["S"] if "value" in item else None,
                json.loads(item["error"]["S"]) if "error" in item else None,
                json.loads(item["meta"]["S"]) if "meta" in item else None,
            )
        return journal

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]:
        stored: list[StoredEvent] = []
        params: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": _s(f"run#{run_id}"),
                ":from": _s(f"e#{after + 1:012d}"),  # the items whose last seq is past ``after``
                ":to": _s("e#999999999999"),
            },
            "ConsistentRead": True,
        }
        while True:
            page = await self._call("query", TableName=self.table, **params)
            for item in page.get("Items", []):
                first = int(item["first"]["N"])
                for offset, value in enumerate(item["events"]["L"]):
                    if first + offset > after:
                        stored.append(StoredEvent(first + offset, value["S"]))
                        if limit is not None and len(stored) >= limit:
                            return stored
            if "LastEvaluatedKey" not in page:
                return stored
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    async def last_seq(self, run_id: str) -> int:
        found = await self._call(
            "get_item", TableName=self.table, Key=_run_key(run_id), ConsistentRead=True, ProjectionExpression="seq"
        )
        return int(found["Item"]["seq"]["N"]) if "Item" in found else 0

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        values: dict[str, Any] = {":runs": _s("runs")}
        condition = "list_pk = :runs"
        if cursor is not None:
            condition += " AND id < :cursor"
            values[":cursor"] = _s(cursor)
        filters = []
        names = {}
        for attribute, value in (("status", status), ("agent", agent), ("thread_id", thread_id)):
            if value is not None:
                filters.append(f"#{attribute} = :{attribute}")
                names[f"#{attribute}"] = attribute
                values[f":{attribute}"] = _s(str(value))
        params: dict[str, Any] = {
            "IndexName": "runs",
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
        }
        if filters:
            params |= {"FilterExpression": " AND ".join(filters), "ExpressionAttributeNames": names}
        items = await self._query(limit=limit + 1, **params)
        runs = [_record(item) for item in items[:limit]]
        return RunPage(runs, runs[-1].id if len(items) > limit else None)

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        items = await self._query(
            limit=limit,
            IndexName="due",
            KeyConditionExpression="due_pk = :due AND due_at <= :before",
            ExpressionAttributeValues={":due": _s("due"), ":before": _n(before)},
            Limit=limit,
        )
        return [_record(item) for item in items[:limit]]

    async def delete_run(self, run_id: str) -> bool:
        from botocore.exceptions import ClientError

        items = await self._query(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": _s(f"run#{run_id}")},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        history = [item for item in items if item["sk"]["S"] != "run"]
        for start in range(0, len(history), 25):  # the journal and events first, the run last
            requests: dict[str, Any] = {
                self.table: [{"DeleteRequest": {"Key": item}} for item in history[start : start + 25]]
            }
            for attempt in range(8):
                left = (await self._call("batch_write_item", RequestItems=requests)).get("UnprocessedItems") or {}
                if not left:
                    break
                requests = left  # throttled: delete what is left, after a pause
                await asyncio.sleep(0.05 * 2**attempt)
            else:
                raise unavailable(
                    "dynamodb", "is throttling", url=self.url, detail=f"run {run_id} was not fully deleted"
                )
        self._seqs.pop(run_id, None)
        try:
            await self._call(
                "delete_item", TableName=self.table, Key=_run_key(run_id), ConditionExpression="attribute_exists(pk)"
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    # -- state ------------------------------------------------------------------------------

    def _state_key(self, scope: str, key: str) -> dict[str, Any]:
        return {"pk": _s(f"state#{scope}"), "sk": _s(f"k#{key}")}

    async def get_state(self, scope: str, key: str) -> str | None:
        found = await self._call("get_item", TableName=self.table, Key=self._state_key(scope, key), ConsistentRead=True)
        return found["Item"]["value"]["S"] if "Item" in found else None

    async def set_state(self, scope: str, key: str, value: str) -> None:
        if _size(value) > ITEM_LIMIT:
            raise ItemTooLarge(f"state {key!r} is {_size(value):,} bytes, over DynamoDB's item limit")
        await self._call("put_item", TableName=self.table, Item={**self._state_key(scope, key), "value": _s(value)})

    async def delete_state(self, scope: str, key: str) -> None:
        await self._call("delete_item", TableName=self.table, Key=self._state_key(scope, key))

    async def close(self) -> None:
        self._client.close()

    # -- scheduled tasks: one claim per (task, tick), a lease until finished -----------------
    # A claim is the item ``tick#{task}``/``t#{scheduled_at!r}``: owner, lease (its expiry), done
    # once finished, and ``expires`` (epoch seconds) for a table whose TTL is on that attribute.
    # An item from before leases has no lease and never lapses. Between 2001 and 2286 an epoch
    # has ten digits before the point, so the sort keys order as the times do and the lapsed
    # claims since a time are one key range.

    @staticmethod
    def _tick_key(task: str, scheduled_at: float) -> dict[str, Any]:
        return {"pk": _s(f"tick#{task}"), "sk": _s(f"t#{scheduled_at!r}")}

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        """A conditional put: the tick is unclaimed, or its claim is unfinished and its lease lapsed."""
        item = {
            **self._tick_key(task, scheduled_at),
            "owner": _s(owner),
            "lease": _n(float(expires)),
            "expires": _n(int(scheduled_at + TICK_MEMORY)),
        }
        return await self._conditional(
            "put_item",
            Item=item,
            ConditionExpression="attribute_not_exists(pk) OR (lease < :now AND attribute_not_exists(done))",
            ExpressionAttributeValues={":now": _n(float(now))},
        )

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        return await self._hold_tick(task, scheduled_at, owner, "SET lease = :value", _n(float(expires)))

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        return await self._hold_tick(task, scheduled_at, owner, "SET done = :value", {"BOOL": True})

    async def _hold_tick(self, task: str, at: float, owner: str, update: str, value: dict[str, Any]) -> bool:
        return await self._conditional(
            "update_item",
            Key=self._tick_key(task, at),
            UpdateExpression=update,
            ConditionExpression="#owner = :owner AND attribute_exists(lease) AND attribute_not_exists(done)",
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={":owner": _s(owner), ":value": value},
        )

    async def _conditional(self, operation: str, **params: Any) -> bool:
        """A conditional write: False when its condition failed."""
        from botocore.exceptions import ClientError

        try:
            await self._call(operation, TableName=self.table, **params)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        items = await self._query(
            KeyConditionExpression="pk = :pk AND sk >= :since",
            FilterExpression="attribute_not_exists(done) AND lease < :now",
            ExpressionAttributeValues={
                ":pk": _s(f"tick#{task}"),
                ":since": _s(f"t#{float(since)!r}"),
                ":now": _n(float(now)),
            },
            ProjectionExpression="sk",
            ConsistentRead=True,
        )
        return sorted(float(item["sk"]["S"][2:]) for item in items)
