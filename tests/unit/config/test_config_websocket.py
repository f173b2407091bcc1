"""The STOMP-over-WebSocket acceptor parameters: Artemis's defaults, the deprecated name,
Artemis's error for a bad encoder type, and the warning for compression."""

from __future__ import annotations

import pytest

from artemis_py.config import ConfigFileError, parse_config


def acceptor(params: str) -> str:
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"<acceptors><acceptor name='a'>tcp://h:1?protocols=STOMP{params}</acceptor></acceptors>\n"
        "</core>\n"
        "</configuration>\n"
    )


def test_artemis_defaults():
    config = parse_config(acceptor(""), environ={})
    assert config.acceptors[0].web_socket_max_frame_payload_length == 65536
    assert config.acceptors[0].web_socket_encoder_type == "binary"
    assert config.warnings == ()


def test_both_parameters_are_read():
    config = parse_config(
        acceptor(";webSocketMaxFramePayloadLength=1024;webSocketEncoderType=text"), environ={}
    )
    assert config.acceptors[0].web_socket_max_frame_payload_length == 1024
    assert config.acceptors[0].web_socket_encoder_type == "text"


def test_the_deprecated_name_is_read_with_a_warning_unless_the_new_one_is_set():
    config = parse_config(acceptor(";stompMaxFramePayloadLength=2048"), environ={})
    assert config.acceptors[0].web_socket_max_frame_payload_length == 2048
    assert "use 'webSocketMaxFramePayloadLength'" in config.warnings[0].message
    both = ";stompMaxFramePayloadLength=2048;webSocketMaxFramePayloadLength=4096"
    config = parse_config(acceptor(both), environ={})
    assert config.acceptors[0].web_socket_max_frame_payload_length == 4096


@pytest.mark.parametrize(
    ("params", "error"),
    [
        (
            ";webSocketEncoderType=Binary",
            "Invalid value for webSocketEncoderType: 'Binary'. Supported values: 'binary', 'text'.",
        ),
        (";webSocketMaxFramePayloadLength=0", "webSocketMaxFramePayloadLength"),
        (";webSocketMaxFramePayloadLength=big", "webSocketMaxFramePayloadLength"),
    ],
)
def test_bad_values_are_errors_with_the_line(params, error):
    with pytest.raises(ConfigFileError) as info:
        parse_config(acceptor(params), environ={})
    problem = info.value.problems[0]
    assert error in problem.message
    assert problem.line == 3


def test_compression_is_named_as_not_implemented():
    config = parse_config(acceptor(";webSocketCompressionSupported=true"), environ={})
    assert any("webSocketCompressionSupported" in w.message for w in config.warnings)
    config = parse_config(acceptor(";webSocketCompressionSupported=false"), environ={})
    assert config.warnings == ()


def test_a_misspelt_parameter_is_pointed_at():
    config = parse_config(acceptor(";websocketEncoderType=text"), environ={})
    assert "did you mean 'webSocketEncoderType'" in config.warnings[0].message
