"""Options of the artemis data source: names, required ones, values, the two directions."""

from __future__ import annotations

import pytest

from artemis_py.client.url import BrokerUrl
from artemis_py.spark.errors import OptionError
from artemis_py.spark.options import (
    BATCH_SOURCE_OPTIONS,
    DEFAULT_FETCH_SIZE,
    DEFAULT_NODE_TIMEOUT_MS,
    SOURCE_OPTIONS,
    STREAM_ONLY_OPTIONS,
    check_batch_read,
    parse_sink_options,
    parse_source_options,
    parse_urls,
)
from artemis_py.spark.source_offsets import SpecificOffsets

QUEUE = {"url": "tcp://localhost:61613", "queue": "orders"}


def error_of(options: dict[str, str], *, sink: bool = False) -> str:
    parse = parse_sink_options if sink else parse_source_options
    with pytest.raises(OptionError) as info:
        parse(options)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_of_a_queue_source() -> None:
    options = parse_source_options(QUEUE)
    assert options.urls == (BrokerUrl("localhost", 61613),)
    assert options.queue == "orders"
    assert options.topic is None
    assert options.subscription is None
    assert options.source_queue == "orders"
    assert options.client_id == "spark-orders"
    assert options.login is None
    assert options.passcode is None
    assert options.max_messages_per_trigger is None
    assert options.starting_offsets == "earliest"
    assert options.fail_on_data_loss is True
    assert options.fetch_size == DEFAULT_FETCH_SIZE == 5000
    assert options.node_timeout_ms == DEFAULT_NODE_TIMEOUT_MS == 60000


def test_keys_compare_without_case_as_spark_lowercases_them() -> None:
    options = parse_source_options(
        {
            "URL": "tcp://h:1",
            "Queue": "q",
            "maxmessagespertrigger": "7",
            "FETCHSIZE": "10",
            "failOnDataLoss": "FALSE",
            "nodeTimeoutMs": "0",
            "startingOffsets": "Latest",
            "LOGIN": "u",
            "passcode": "p",
        }
    )
    assert options.max_messages_per_trigger == 7
    assert options.fetch_size == 10
    assert options.fail_on_data_loss is False
    assert options.node_timeout_ms == 0
    assert options.starting_offsets == "latest"
    assert (options.login, options.passcode) == ("u", "p")


def test_topic_subscription_reads_the_subscription_queue() -> None:
    options = parse_source_options({"url": "h", "topic": "prices", "subscription": "agg"})
    assert options.client_id == "spark-prices"
    assert options.source_queue == "prices::spark-prices.agg"
    named = parse_source_options(
        {"url": "h", "topic": "prices", "subscription": "agg", "clientId": "job7"}
    )
    assert named.source_queue == "prices::job7.agg"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tcp://a:1", [("a", 1)]),
        ("tcp://a:1,tcp://b:2", [("a", 1), ("b", 2)]),
        (" tcp://a:1 , b:2 ", [("a", 1), ("b", 2)]),
        ("(tcp://a:1,tcp://b:2)", [("a", 1), ("b", 2)]),
        ("a", [("a", 61613)]),
        ("tcp://[::1]:5,stomp://c:6", [("::1", 5), ("c", 6)]),
        ("tcp://a:1,tcp://a:1", [("a", 1)]),
    ],
)
def test_url_lists(text: str, expected: list[tuple[str, int]]) -> None:
    assert parse_urls(text) == tuple(BrokerUrl(host, port) for host, port in expected)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("tcp://a:1,", ["empty entry"]),
        ("(tcp://a:1,tcp://b:2)?ha=true", ["unsupported parameters", "?ha=true"]),
        ("(tcp://a:1", ["no closing parenthesis"]),
        ("http://a:1", ["unsupported URL scheme", "http"]),
        ("tcp://a:x", ["invalid port"]),
        ("tcp://a:1?sslEnabled=true", ["no parameters"]),
    ],
)
def test_bad_urls_name_the_option(text: str, words: list[str]) -> None:
    message = error_of({"url": text, "queue": "q"})
    assert message.startswith("option url: ")
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"queue": "q"}, ["missing option: url"]),
        ({"url": " ", "queue": "q"}, ["missing option: url"]),
        ({"url": "h"}, ["missing option: queue", "topic with subscription"]),
        ({"url": "h", "queue": "q", "topic": "t"}, ["queue and topic exclude each other"]),
        ({"url": "h", "queue": "q", "subscription": "s"}, ["queue and subscription"]),
        ({"url": "h", "topic": "t"}, ["topic needs option subscription"]),
        ({"url": "h", "subscription": "s"}, ["subscription needs option topic"]),
        ({"url": "h", "queue": ""}, ["option queue is empty"]),
        ({"url": "h", "queue": " q"}, ["option queue has spaces around it"]),
        ({"url": "h", "queue": "queue://q"}, ["option queue takes a plain name", "'q'"]),
        ({"url": "h", "queue": "q", "passcode": "p"}, ["passcode needs option login"]),
    ],
)
def test_missing_and_conflicting_options(options: dict[str, str], words: list[str]) -> None:
    message = error_of(options)
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("maxMessagesPerTrigger", "0", ["must be at least 1, got 0"]),
        ("maxMessagesPerTrigger", "ten", ["must be an integer", "'ten'"]),
        ("maxMessagesPerTrigger", "1.5", ["must be an integer", "'1.5'"]),
        ("fetchSize", "-3", ["must be at least 1, got -3"]),
        ("nodeTimeoutMs", "-1", ["must be at least 0, got -1"]),
        ("failOnDataLoss", "yes", ["must be true or false", "'yes'"]),
        ("startingOffsets", "oldest", ["startingOffsets", "'oldest'"]),
        ("startingOffsets", "{bad json", ["startingOffsets", "invalid JSON"]),
        ("startingOffsets", '{"n1": "5"}', ["startingOffsets", "stream n1", '"5"']),
    ],
)
def test_wrong_values_name_option_and_value(name: str, value: str, words: list[str]) -> None:
    message = error_of({**QUEUE, name: value})
    assert name in message
    for word in words:
        assert word in message


def test_unknown_option_with_a_close_spelling() -> None:
    message = error_of({**QUEUE, "maxMessagesPerTriger": "5"})
    assert "unknown option maxMessagesPerTriger" in message
    assert "did you mean maxMessagesPerTrigger?" in message


def test_unknown_option_without_a_close_spelling_lists_the_options() -> None:
    message = error_of({**QUEUE, "zzz": "1"})
    assert "unknown option zzz;" in message
    assert "did you mean" not in message
    assert "startingOffsets" in message


def test_an_option_of_the_other_direction_says_so() -> None:
    assert "option destination is for writing, not for reading" in error_of(
        {**QUEUE, "destination": "d"}
    )
    sink = {"url": "h", "destination": "d"}
    assert "option queue is for reading, not for writing" in error_of(
        {**sink, "queue": "q"}, sink=True
    )


@pytest.mark.parametrize(
    ("key", "value", "name"),
    [
        ("maxMessagesPerTrigger", "100", "maxMessagesPerTrigger"),
        ("maxmessagespertrigger", "100", "maxMessagesPerTrigger"),  # as Spark passes it
        ("startingOffsets", "latest", "startingOffsets"),
        ("startingOffsets", '{"n1": 5}', "startingOffsets"),
        # The value a batch read acts as if given is refused too: the option is what is wrong.
        ("STARTINGOFFSETS", "earliest", "startingOffsets"),
    ],
)
def test_a_batch_read_refuses_stream_only_options(key: str, value: str, name: str) -> None:
    options = parse_source_options({**QUEUE, key: value})  # fine for a stream
    with pytest.raises(OptionError) as info:
        check_batch_read(options)
    assert str(info.value) == (
        f"option {name} is for streaming reads only (spark.readStream), not for batch reads "
        "(spark.read)"
    )


def test_a_batch_read_takes_every_other_source_option() -> None:
    assert set(STREAM_ONLY_OPTIONS) == {"maxMessagesPerTrigger", "startingOffsets"}
    assert set(BATCH_SOURCE_OPTIONS) == set(SOURCE_OPTIONS) - set(STREAM_ONLY_OPTIONS)
    every = {
        "url": "tcp://h:1",
        "topic": "t",
        "subscription": "s",
        "clientId": "c",
        "login": "u",
        "passcode": "p",
        "failOnDataLoss": "false",
        "fetchSize": "10",
        "nodeTimeoutMs": "0",
    }
    assert set(every) | {"queue"} == set(BATCH_SOURCE_OPTIONS)
    check_batch_read(parse_source_options(every))
    check_batch_read(parse_source_options(QUEUE))


def test_path_is_refused_with_a_hint() -> None:
    assert "takes no path" in error_of({**QUEUE, "path": "orders"})


def test_same_option_twice_in_different_case() -> None:
    assert "option queue is given twice" in error_of({**QUEUE, "QUEUE": "other"})


def test_starting_offsets_json() -> None:
    options = parse_source_options({**QUEUE, "startingOffsets": '{"n1": 5, "n2": -1, "n3": -2}'})
    assert options.starting_offsets == SpecificOffsets({"n1": 5, "n2": -1, "n3": -2})


def test_starting_offsets_of_another_queue_are_refused() -> None:
    whole = '{"v": 1, "queue": "other", "streams": {"n1": 3}}'
    message = error_of({**QUEUE, "startingOffsets": whole})
    assert "startingOffsets is for queue 'other'" in message
    assert "'orders'" in message
    same = parse_source_options({**QUEUE, "startingOffsets": whole.replace("other", "orders")})
    assert same.starting_offsets == SpecificOffsets({"n1": 3}, "orders")


def test_sink_defaults_and_values() -> None:
    options = parse_sink_options({"url": "a,b", "destination": "queue://out"})
    assert options.urls == (BrokerUrl("a", 61613), BrokerUrl("b", 61613))
    assert options.destination == "queue://out"
    assert options.persistent is True
    assert options.node_timeout_ms == 60000
    assert options.write_id is None
    assert parse_sink_options({"url": "a", "writeId": "q-1.b_7"}).write_id == "q-1.b_7"
    assert parse_sink_options({"url": "a", "persistent": "false"}).destination is None
    assert parse_sink_options({"url": "a", "persistent": "False"}).persistent is False


def test_spark_checkpoint_location_is_not_an_error() -> None:
    # Spark passes its own checkpointLocation to a streaming sink's options.
    assert parse_sink_options({"url": "a", "checkpointlocation": "/tmp/x"}).urls


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"destination": "d"}, ["missing option: url"]),
        ({"url": "a", "persistent": "1"}, ["persistent must be true or false", "'1'"]),
        ({"url": "a", "destination": "fifo://x"}, ["option destination", "fifo"]),
        ({"url": "a", "destination": "queue://"}, ["option destination", "no name"]),
        ({"url": "a", "nodeTimeoutMs": "soon"}, ["nodeTimeoutMs must be an integer"]),
        ({"url": "a", "fetchSize": "5"}, ["fetchSize is for reading, not for writing"]),
        ({"url": "a", "writeId": "q:1"}, ["option writeId takes", "'q:1'"]),
        ({"url": "a", "writeId": ""}, ["option writeId takes"]),
        ({"url": "a", "writeId": "x" * 201}, ["option writeId takes"]),
    ],
)
def test_bad_sink_options(options: dict[str, str], words: list[str]) -> None:
    message = error_of(options, sink=True)
    for word in words:
        assert word in message
