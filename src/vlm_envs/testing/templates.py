"""Qwen-format chat templates, written here from the published formats (see FACTS.md).

``QWEN2_VL_TEMPLATE`` follows Qwen2-VL / Qwen2.5-VL: every message is
``<|im_start|>{role}\\n...<|im_end|>\\n`` with the role written as given (so a tool message becomes
``<|im_start|>tool\\n``), a conversation that does not open with a system message gets the default
system prompt, and an image part is ``<|vision_start|><|image_pad|><|vision_end|>``.

``QWEN3_VL_TEMPLATE`` follows Qwen3-VL without thinking: no default system prompt, and a tool message
is wrapped as ``\\n<tool_response>\\n...\\n</tool_response>`` inside a user turn that consecutive tool
messages share.

Every piece of output is an explicit string expression, so the rendering does not depend on Jinja's
whitespace settings (transformers compiles templates with ``trim_blocks`` and ``lstrip_blocks``).
"""

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

_CONTENT_MACRO = (
    "{%- macro render_content(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] == 'image' or 'image' in part -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif part['type'] == 'video' or 'video' in part -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in part -%}{{- part['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
)

_GENERATION_PROMPT = "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"

_PLAIN_MESSAGE = (
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{{- render_content(message['content']) -}}"
    "{{- '<|im_end|>\\n' -}}"
)

QWEN2_VL_TEMPLATE = (
    _CONTENT_MACRO + "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM_PROMPT + "<|im_end|>\\n' -}}"
    "{%- endif -%}" + _PLAIN_MESSAGE + "{%- endfor -%}" + _GENERATION_PROMPT
)

QWEN3_VL_TEMPLATE = (
    _CONTENT_MACRO + "{%- for message in messages -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}"
    "{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' -}}{{- render_content(message['content']) -}}{{- '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}" + _PLAIN_MESSAGE + "{%- endif -%}"
    "{%- endfor -%}" + _GENERATION_PROMPT
)
