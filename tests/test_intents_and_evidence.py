"""Intent coverage (a request with several steps gets each step's tool) and small talk (no evidence,
no catalog tool), on a real kernel with the shipped model."""

import re
from typing import Annotated

import numpy as np
import pytest
from semantic_kernel import Kernel
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval.text import split_request_intents

DISCOVERY = {"ToolSearch-search_tools", "ToolSearch-describe_tool"}


class Files:
    """Many ways to create a file, one way to change one: the shape that buried the second step."""

    @kernel_function(description="Create a new text file with the given content.")
    def create_file(self, path: Annotated[str, "file path"], content: Annotated[str, "text"]) -> str:
        return path

    @kernel_function(description="Write content to a file, creating it if it does not exist.")
    def write_file(self, path: Annotated[str, "file path"], content: Annotated[str, "text"]) -> str:
        return path

    @kernel_function(description="Create a new document from a template and save it.")
    def new_document(self, name: Annotated[str, "document name"], template: Annotated[str, "template"]) -> str:
        return name

    @kernel_function(description="Create an empty file at a path.")
    def touch_file(self, path: Annotated[str, "file path"]) -> str:
        return path

    @kernel_function(description="Save text as a new note file.")
    def save_note_file(self, title: Annotated[str, "title"], text: Annotated[str, "text"]) -> str:
        return title

    @kernel_function(description="Create a new folder.")
    def create_folder(self, path: Annotated[str, "folder path"]) -> str:
        return path

    @kernel_function(description="Replace every occurrence of a phrase in an existing file with another phrase.")
    def replace_in_file(
        self, path: Annotated[str, "file path"], old: Annotated[str, "phrase"], new: Annotated[str, "phrase"]
    ) -> str:
        return path


class Weather:
    @kernel_function(description="Current weather for a city.")
    def current_weather(self, city: Annotated[str, "city"]) -> str:
        return city

    @kernel_function(description="Weather forecast for the next days in a city.")
    def forecast(self, city: Annotated[str, "city"], days: Annotated[int, "days"]) -> str:
        return city


class Messaging:
    @kernel_function(description="Send a direct message to a user.")
    def send_direct_message(self, user: Annotated[str, "user"], text: Annotated[str, "message"]) -> str:
        return user

    @kernel_function(description="Post a greeting in the team channel.")
    def post_greeting(self, channel: Annotated[str, "channel"]) -> str:
        return channel


@pytest.fixture
def files_kernel() -> Kernel:
    kernel = Kernel()
    kernel.add_plugin(Files(), "Files")
    kernel.add_plugin(Weather(), "Weather")
    kernel.add_plugin(Messaging(), "Messaging")
    return kernel


TWO_STEPS = (
    "create a file 'Work Plan.txt' with the content 'improve product quality this quarter', "
    "then change 'product quality' to 'customer satisfaction'"
)


def test_a_request_is_split_at_its_steps_not_at_every_and():
    assert split_request_intents(TWO_STEPS) == [
        "create a file 'Work Plan.txt' with the content 'improve product quality this quarter'",
        "change 'product quality' to 'customer satisfaction'",
    ]
    assert split_request_intents("book a flight to Oslo and after that a hotel near the station") == [
        "book a flight to Oslo",
        "a hotel near the station",
    ]
    # One action over several objects, or two sentences, is one intent (single requests keep their ranking).
    assert split_request_intents("Determine the median and variance of 3, 4, 5.") == []
    assert split_request_intents("Buy bread and butter. Quickly please!") == []
    assert split_request_intents("Get the film. Restore it. Email Bob.") == [
        "Get the film.",
        "Restore it.",
        "Email Bob.",
    ]


def test_words_that_add_a_request_start_an_intent():
    # "Also, ..." opening a later sentence, or "and also" / ", also" inside one, adds a request.
    assert split_request_intents("Will it rain in Oslo tomorrow? Also, what do houses cost there?") == [
        "Will it rain in Oslo tomorrow?",
        "Also, what do houses cost there?",
    ]
    assert split_request_intents("Additionally, file it. Thanks. Bye now.") != []  # 3 sentences, as before
    assert split_request_intents("Suggest a course on statistics and also recommend relaxing music") == [
        "Suggest a course on statistics",
        "recommend relaxing music",
    ]
    # A piece too short to be a request stays with its neighbour, before or after it.
    assert split_request_intents("If possible, also give me the forecast for Rome") == []
    # "also" that does not add a request does not split.
    assert split_request_intents("Is the museum also open on Sundays? Thanks a lot.") == []


def test_step_words_start_an_intent_inside_a_sentence_or_opening_one():
    steps = ["Save the report as a.txt", "email it to Bob"]
    for joined in [
        "Save the report as a.txt, and finally email it to Bob",
        "Save the report as a.txt and subsequently email it to Bob",
        "Save the report as a.txt and once done email it to Bob",
        "Save the report as a.txt, after which email it to Bob",
        "Save the report as a.txt, next email it to Bob",
    ]:
        assert split_request_intents(joined) == steps, joined
    assert split_request_intents("Save the report as a.txt, followed by emailing it to Bob") == [
        "Save the report as a.txt",
        "emailing it to Bob",
    ]
    for opener in ["Then", "After that,", "Afterwards,", "Finally,", "Lastly", "Next,", "Once that is done,"]:
        request = f"Save the report as a.txt. {opener} email it to Bob."
        assert split_request_intents(request) == ["Save the report as a.txt.", f"{opener} email it to Bob."], opener
    assert split_request_intents("Save the report as a.txt; then email it to Bob") == [
        "Save the report as a.txt",
        "then email it to Bob",
    ]
    # A list: marked lines, or items numbered from 1 inside a line; a lead-in joins the first item.
    for listed in [
        "1. Save the report as a.txt\n2. email it to Bob",
        "- Save the report as a.txt\n- email it to Bob",
        "Save the report as a.txt\n* email it to Bob\n* delete the draft",
        "1) Save the report as a.txt, and 2) email it to Bob",
        "(1) Save the report as a.txt (2) email it to Bob",
    ]:
        assert split_request_intents(listed)[-2:] in (steps, ["email it to Bob", "delete the draft"]), listed
    assert split_request_intents("Please do this:\n- Save the report as a.txt\n- email it to Bob") == [
        "Please do this: Save the report as a.txt",
        "email it to Bob",
    ]
    assert split_request_intents("Add (2) and 3, then subtract (1)") == ["Add (2) and 3", "subtract (1)"]
    assert split_request_intents("- only one item: save the report") == []
    # "next" that names a time or a place starts no step.
    for one in [
        "I need to fly to Paris. Next Tuesday would be best.",
        "Find flights for this week and next week.",
        "Put the lamp on the desk, and next to it a plant.",
    ]:
        assert split_request_intents(one) == [], one


@pytest.mark.parametrize("padding", [" " * 20_000, "\t \u00a0" * 5_000, " then" * 4_000, ", also" * 3_000])
def test_splitting_a_padded_request_does_linear_work(monkeypatch, padding):
    """A request padded with whitespace or step words once cost seconds to split: a boundary pattern
    retried every shorter run of whitespace (the list patterns too: 11 s for 20,000 spaces), and short
    pieces were re-tokenized as they grew."""
    from sk_toolfilter.retrieval import text

    patterns_read, tokenized = [], []
    real_tokenize = text.tokenize

    class Recording:
        def __init__(self, pattern):
            self.pattern = pattern

        def split(self, string):
            patterns_read.append(string)
            return self.pattern.split(string)

        def finditer(self, string):
            patterns_read.append(string)
            return self.pattern.finditer(string)

        def findall(self, string):
            patterns_read.append(string)
            return self.pattern.findall(string)

    def counting_tokenize(piece, **kwargs):
        tokenized.append(len(piece))
        return real_tokenize(piece, **kwargs)

    monkeypatch.setattr(text, "_STEP_BOUNDARY", Recording(text._STEP_BOUNDARY))
    monkeypatch.setattr(text, "_CLAUSE_BOUNDARY", Recording(text._CLAUSE_BOUNDARY))
    monkeypatch.setattr(text, "_INLINE_ITEM", Recording(text._INLINE_ITEM))
    monkeypatch.setattr(text, "_LIST_ITEM", Recording(text._LIST_ITEM))
    monkeypatch.setattr(text, "tokenize", counting_tokenize)
    request = f"book a flight to Oslo{padding} and then rent a car at the airport"
    intents = text.split_request_intents(request)
    text.split_request_clauses(request)
    assert patterns_read and not any(re.search(r"\s\s", s) for s in patterns_read)  # single-spaced only
    assert sum(tokenized) <= 3 * len(request)  # each piece tokenized once, not once per growth
    assert intents[0].startswith("book a flight to Oslo") and intents[-1] == "rent a car at the airport"


@pytest.mark.parametrize(
    "request_text",
    [
        "Create a file 'plan.txt' with the text 'improve product quality this quarter'. "
        "Also, change 'product quality' to 'customer satisfaction' in it.",
        "Create a file 'plan.txt' with the text 'improve product quality' "
        "and also change 'product quality' to 'customer satisfaction'",
        # A sentence or a clause that opens with a step word is the next step.
        "Create a file 'plan.txt' with the text 'improve product quality this quarter'. "
        "Then change 'product quality' to 'customer satisfaction' in it.",
        "Create a file 'plan.txt' with the text 'improve product quality this quarter'; "
        "once that's done, change 'product quality' to 'customer satisfaction'",
        "Create a file 'plan.txt' with the text 'improve product quality this quarter', "
        "and finally change 'product quality' to 'customer satisfaction'",
        "1. Create a file 'plan.txt' with the text 'improve product quality this quarter'\n"
        "2. Change 'product quality' to 'customer satisfaction' in it",
    ],
)
async def test_a_request_that_adds_a_second_request_gets_its_tool(files_kernel, request_text):
    config = ToolFilterConfig(top_k=3, similarity_threshold=0.0)
    covered = await (await create_tool_filter(files_kernel, config)).filter_tools(request_text)
    assert "Files-replace_in_file" in covered, covered
    assert "Files-create_file" in covered, covered
    whole = await create_tool_filter(files_kernel, config.model_copy(update={"split_queries": False}))
    assert "Files-replace_in_file" not in await whole.filter_tools(request_text)


async def test_a_two_step_request_gets_each_steps_tool_before_near_duplicates_of_the_first(files_kernel):
    config = ToolFilterConfig(top_k=3, similarity_threshold=0.0)
    manager = await create_tool_filter(files_kernel, config)
    names = [n for n in await manager.filter_tools(TWO_STEPS) if n not in DISCOVERY]
    assert "Files-replace_in_file" in names, names
    assert any(n in names for n in ("Files-create_file", "Files-write_file")), names
    # Ranked as one text, the creation tools fill the budget and the second step's tool is cut.
    whole = await create_tool_filter(files_kernel, config.model_copy(update={"split_queries": False}))
    assert "Files-replace_in_file" not in await whole.filter_tools(TWO_STEPS)


async def test_a_single_intent_request_ranks_as_without_intent_coverage(files_kernel):
    config = ToolFilterConfig(top_k=5, similarity_threshold=0.0)
    covered = await create_tool_filter(files_kernel, config)
    plain = await create_tool_filter(files_kernel, config.model_copy(update={"split_queries": False}))
    for query in ["create a new file called notes.txt with my shopping list", "weather in Paris and Rome"]:
        assert [d.full_name for d in await covered.explain(query)] == [d.full_name for d in await plain.explain(query)]


SMALL_TALK = ["hi", "thanks!", "what can you do?", "good morning", "bye", "hello, how are you?"]


async def test_small_talk_sends_only_the_pinned_tools_and_explain_says_why(files_kernel):
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(always_include=["Weather-current_weather"]))
    for request in SMALL_TALK:
        assert set(await manager.filter_tools(request)) == {"Weather-current_weather", *DISCOVERY}, request
        cut = [d for d in await manager.explain(request) if not d.kept]
        assert all("small talk" in d.reason for d in cut), cut
    # "hi" is close to the greeting tool (cosine 0.32, far above the 0.2 floor): it is ranked, and cut for a
    # reason the user can read. (Other tools sit near the floor, where int8 inference differs by CPU.)
    assert "Messaging-post_greeting" in [d.full_name for d in await manager.explain("hi") if not d.kept]


async def test_without_the_small_talk_check_relative_scores_make_a_tool_look_certain(files_kernel):
    off = await create_tool_filter(files_kernel, ToolFilterConfig(no_tool_margin=None))
    decisions = await off.explain("hi")
    kept = [(d.full_name, d.score) for d in decisions if d.kept and d.full_name not in DISCOVERY]
    assert kept[0] == ("Messaging-post_greeting", 1.0)  # the best match looks certain, however weak


async def test_a_request_that_names_a_tool_or_asks_for_one_is_not_small_talk(files_kernel):
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    assert "Weather-forecast" in await manager.filter_tools("hi! Weather-forecast please")
    assert "Weather-current_weather" in await manager.filter_tools("hi, what's the weather in Oslo right now?")


class Memory:
    """The registry's knowledge-graph memory server, as plugin functions: nothing in these texts says
    'remember' or 'forget', so a request phrased as conversation links to them only weakly."""

    @kernel_function(description="Create multiple new entities in the knowledge graph")
    def create_entities(self, entities: Annotated[str, "entities to create"]) -> str:
        return entities

    @kernel_function(description="Add new observations to existing entities in the knowledge graph")
    def add_observations(self, observations: Annotated[str, "observations to add"]) -> str:
        return observations

    @kernel_function(description="Delete multiple entities and their associated relations from the knowledge graph")
    def delete_entities(self, names: Annotated[str, "entity names"]) -> str:
        return names

    @kernel_function(description="Open specific nodes in the knowledge graph by their names")
    def open_nodes(self, names: Annotated[str, "entity names"]) -> str:
        return names


ABOUT_SOMETHING = [
    "Remember that Alice works at Contoso as a data engineer",
    "Forget everything about Bob",
    "Who does Alice work for?",
    "What do you know about Alice?",
    "Keep in mind that I prefer meetings in the morning",
]


async def test_a_request_about_something_is_never_small_talk_however_weakly_the_encoder_links_it(files_kernel):
    files_kernel.add_plugin(Memory(), "Memory")
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    for request in ABOUT_SOMETHING:
        decisions = await manager.explain(request)
        assert not any("small talk" in d.reason for d in decisions), (request, decisions)
        catalog = [d for d in decisions if d.full_name not in DISCOVERY]
        # Ranked as usual: a tool with evidence is offered, or explain shows the closest ones and why not.
        assert any(d.kept for d in catalog) or (catalog and all("no evidence" in d.reason for d in catalog)), decisions
    for request in SMALL_TALK:  # the same catalog: small talk still sends none
        assert set(await manager.filter_tools(request)) == DISCOVERY, request


def test_small_talk_has_at_most_one_word_outside_the_words_of_small_talk():
    from sk_toolfilter.retrieval.small_talk import MAX_SUBJECT_WORDS, subject_words

    def may_be_small_talk(request: str) -> bool:  # what the small-talk check reads of the words
        return len(subject_words(request)) <= MAX_SUBJECT_WORDS

    assert subject_words("much appreciated") == ["appreci"]
    assert subject_words("你好") == []  # Chinese is read through its English gloss
    assert all(may_be_small_talk(r) for r in ["much appreciated", "good night", "are you a bot?", "谢谢你"])
    assert not any(may_be_small_talk(r) for r in ABOUT_SOMETHING)
    assert not may_be_small_talk("hi " + "the quarterly revenue report for Contoso " * 10_000)  # read from the start
    assert subject_words("you're the best") == ["best"]  # what is left of a contraction is no subject
    # A negated auxiliary is a function word whole: its head ("don", "isn", "won") is no subject either ...
    assert subject_words("that wasn't me") == subject_words("no, I don't need anything") == []
    assert subject_words("we aren’t done yet") == ["done"]
    # ... while the same letters outside a contraction stay words.
    assert subject_words("who won the donation drive?") == ["won", "donat", "drive"]
    # Indefinite pronouns and adverbs of degree or time name nothing either.
    assert subject_words("is there anything else you can still help with?") == []
    assert subject_words("Forget everything about Bob") == ["forget", "bob"]


async def test_a_short_ranking_is_filled_with_the_closest_tools_which_are_never_sent(files_kernel):
    from sk_toolfilter.retrieval.cutoff import apply_cutoff
    from sk_toolfilter.retrieval.search import rank_tools

    # No threshold and room for ten: only the budget and evidence decide what is sent.
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(top_k=10, similarity_threshold=0.0))
    request = "what's the weather in Oslo?"
    ranking = await rank_tools(manager.index, request, manager.config, limit=8)
    with_evidence = [t.full_name for t in ranking.tools if t.evidence]
    filling = [t.full_name for t in ranking.tools if not t.evidence]
    # Evidence first; the rest of the limit holds the closest other tools, each once, at score 0.
    assert with_evidence and set(with_evidence) <= {"Weather-current_weather", "Weather-forecast"}
    assert [t.evidence for t in ranking.tools] == [True] * len(with_evidence) + [False] * len(filling)
    assert len(ranking.tools) == 8 == len({t.full_name for t in ranking.tools})
    assert all(t.score == 0.0 for t in ranking.tools if not t.evidence)
    # The cut never keeps them, whatever the threshold; the selection does not list them at all.
    decisions = apply_cutoff(ranking.tools, manager.config)
    assert [d.full_name for d in decisions if d.kept] == with_evidence
    assert all("no evidence" in d.reason for d in decisions if d.full_name in filling)
    assert [n for n in await manager.filter_tools(request) if n not in DISCOVERY] == with_evidence
    assert not (set(filling) - set(DISCOVERY)) & {d.full_name for d in await manager.explain(request)}  # sent always
    # Tools the encoder places alike (duplicate texts) fill in catalog order, however many tie.
    from sk_toolfilter.retrieval.search import _closest_left_out

    tied = np.array([0.1, *[0.5] * 40, 0.2], dtype=np.float32)
    assert _closest_left_out([3], tied, None, 5) == [1, 2, 4, 5, 6]
    # Without `fill`, and for small talk, a ranking holds only tools with evidence.
    unfilled = await rank_tools(manager.index, request, manager.config, limit=8, fill=False)
    assert [t.full_name for t in unfilled.tools] == with_evidence
    assert all(t.evidence for t in (await rank_tools(manager.index, "thanks!", manager.config, limit=8)).tools)


class Assistant:
    """Tools a subjectless request reads close to: its cosines alone would send them."""

    @kernel_function(description="List what this assistant can do and the tasks it can help you with.")
    def capabilities(self) -> str:
        return ""

    @kernel_function(description="Confirm or decline the pending action: yes or no.")
    def confirm_action(self, answer: Annotated[str, "yes or no"]) -> str:
        return answer


async def test_a_request_that_names_nothing_sends_only_the_pins_whatever_its_cosines(files_kernel):
    files_kernel.add_plugin(Assistant(), "Assistant")
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    requests = ["what can you do?", "yes please", "no thanks", "ok got it", "are you there?", "anything else?"]
    for request in [*requests, "no, I don't need anything", "that wasn't me"]:
        assert set(await manager.filter_tools(request)) == DISCOVERY, request
        cut = [d for d in await manager.explain(request) if not d.kept]
        assert all("names nothing a tool could act on" in d.reason for d in cut), cut
    # With the check off, "what can you do?" reads closest to the capabilities tool, which is sent.
    off = await create_tool_filter(files_kernel, ToolFilterConfig(no_tool_margin=None))
    assert "Assistant-capabilities" in await off.filter_tools("what can you do?")


async def test_a_request_no_tool_has_evidence_for_sends_only_the_pins_and_explain_shows_the_closest(files_kernel):
    files_kernel.add_plugin(Memory(), "Memory")
    # A floor no cosine reaches, and a request sharing no word with any tool: no evidence at all.
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(semantic_floor=0.99))
    assert set(await manager.filter_tools("Forget everything about Bob")) == DISCOVERY
    closest = [d for d in await manager.explain("Forget everything about Bob") if d.full_name not in DISCOVERY]
    assert len(closest) == 3 and not any(d.kept for d in closest)
    assert all("no evidence: cosine" in d.reason and "semantic_floor 0.99" in d.reason for d in closest), closest


# Conversation the five descriptions missed: no word of it is in small talk's vocabulary, and none of it is
# an exemplar (checked below); each is a paraphrase of CLINC's conversational intents or a dialogue act.
CONVERSATION = [
    "are you a robot?", "just a moment", "thanks a million", "sorry, my fault", "okay, understood",
    "who is your creator?", "do you own a dog?", "give me a sec", "where do you live?",
    "do you keep any pets at home?", "what company built you?", "how many years old are you?",
]  # fmt: skip
SHORT_TOOL_REQUESTS = {
    "what's the weather like?": "Weather-current_weather",
    "what's the forecast?": "Weather-forecast",
    "create a folder": "Files-create_folder",
    "post a greeting in the team channel": "Messaging-post_greeting",
    "save a note about the meeting": "Files-save_note_file",
}


async def test_conversation_like_the_exemplars_sends_only_the_pins_and_explain_names_the_example(files_kernel):
    from sk_toolfilter.retrieval.small_talk import load_exemplars

    exemplars = {t.lower().strip("?!. ") for t in load_exemplars().texts}
    assert not any(r.lower().strip("?!. ") in exemplars for r in CONVERSATION)  # paraphrases, not copies
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    for request in CONVERSATION:
        assert set(await manager.filter_tools(request)) == DISCOVERY, request
    # Three subject words: beyond the descriptions' reach, the exemplars decide, and explain names the closest.
    cut = [d for d in await manager.explain("do you keep any pets at home?") if not d.kept]
    assert cut and all("reads as small talk (like '" in d.reason for d in cut), cut
    assert all("the closest request for a tool" in d.reason for d in cut), cut
    # Short requests for a tool are compared with the same exemplars and still get their tool.
    for request, tool in SHORT_TOOL_REQUESTS.items():
        assert tool in await manager.filter_tools(request), request


# Longer questions about the assistant (4 to 6 subject words), or ones whose only marks are numbers: the
# examples judge them only with a clear lead (each is >= 0.2 closer to a no-tool example than to the best
# tool, >= 0.09 beyond the required lead over the closest tool request). None is an exemplar.
LONGER_CONVERSATION = [
    "if you had to pick one, would you rather own a cat or a dog?",
    "what kind of animals do you have living at your place?",
    "can you feel emotions like a real human being?",
    "are you 25 years old?",
]
# Requests for a tool as long, or with numbers, that must still be ranked (one about a pet among them).
LONGER_TOOL_REQUESTS = {
    "create a new folder for the quarterly report documents": "Files-create_folder",
    "what will the weather be like in the next 3 days?": "Weather-forecast",
    "save a note that the dog needs a vet visit": "Files-save_note_file",
}


async def test_longer_questions_about_the_assistant_are_judged_only_with_a_clear_lead(files_kernel):
    from sk_toolfilter.retrieval.small_talk import load_exemplars

    exemplars = {t.lower().strip("?!. ") for t in load_exemplars().texts}
    assert not {r.lower().strip("?!. ") for r in LONGER_CONVERSATION} & exemplars
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    for request in LONGER_CONVERSATION:
        assert set(await manager.filter_tools(request)) == DISCOVERY, request
        cut = [d for d in await manager.explain(request) if not d.kept]
        assert cut and all("reads as small talk (like '" in d.reason for d in cut), (request, cut)
    for request, tool in LONGER_TOOL_REQUESTS.items():
        assert tool in await manager.filter_tools(request), request
        assert not any("small talk" in d.reason for d in await manager.explain(request)), request


def test_names_numbers_quotations_and_other_scripts_are_content_marks():
    from sk_toolfilter.retrieval.small_talk import content_marks

    assert content_marks("Who does Alice work for?") == ["Alice"]
    assert content_marks("Alice works at Contoso") == ["Contoso"]  # a sentence's first word may be any word
    assert content_marks("ID 3726") == ["3726"]
    assert content_marks('what does "hola" mean?') == ['"hola"']
    assert content_marks("hey do 거실 에어컨 실행") == ["거실", "에어컨", "실행"]
    assert content_marks("Привет") == ["Привет"]
    for conversation in ["thanks. I'm back", "Hi! Are you an AI?", "你好", "ok, I'll wait", "café?"]:
        assert content_marks(conversation) == [], conversation


async def test_a_short_request_naming_someone_is_ranked_even_when_it_reads_like_an_exemplar(files_kernel, monkeypatch):
    from sk_toolfilter.retrieval import first_stage

    files_kernel.add_plugin(Memory(), "Memory")
    manager = await create_tool_filter(files_kernel, ToolFilterConfig())
    # Close to CLINC's "who do you work for" and "what are your hobbies", but they name someone.
    requests = [
        "Who does Alice work for?",
        "What are Alice's hobbies?",
        "What hobbies does Alice enjoy in her free time?",
    ]
    for request in [*requests, "Where is Bob from?", "How old is Carol?"]:  # the last two: one subject word
        assert not any("small talk" in d.reason for d in await manager.explain(request)), request
    monkeypatch.setattr(first_stage, "content_marks", lambda request: [])  # without the names: judged small talk
    for request in requests:
        assert any("small talk (like" in d.reason for d in await manager.explain(request)), request


def test_the_exemplars_come_from_clinc150s_train_split_at_a_pinned_commit():
    import json

    from sk_toolfilter.retrieval.small_talk import EXEMPLARS_FILE, load_exemplars

    content = json.loads(EXEMPLARS_FILE.read_text())
    source = content["source"]
    assert source["repository"] == "clinc/oos-eval" and len(source["commit"]) == 40
    assert source["licence"].startswith("CC BY 3.0") and "train split" in source["file"]
    exemplars = load_exemplars()
    assert len(exemplars.no_tool) > 400 and len(exemplars.tool_request) > 2000
    assert not set(exemplars.no_tool) & set(exemplars.tool_request)
    # None of the benchmark's small-talk lists is among them (those lists measure the check).
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from intent_benchmark import SMALL_TALK_LISTS

    lists = {r.lower().strip(" ?!.") for rs in SMALL_TALK_LISTS.values() for r in rs}
    assert not lists & {t.lower().strip(" ?!.") for t in exemplars.texts}


async def test_the_exemplar_vectors_small_talk_is_judged_with_are_what_this_cpu_computes(files_kernel):
    # Int8 inference differs by CPU (a tool-trained encoder's vector of one text moved by up to 0.057
    # cosine between two x86 CPUs): whichever CPU runs this, the exemplars the index compares requests
    # with must be what its own request encoder gives (a shipped set it matches, or embedded here).
    import numpy as np

    from sk_toolfilter import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.small_talk import load_exemplars

    for model in ["minilm-l6-tools-v1", "minilm-l2-tools-v1", "all-MiniLM-L6-v2-int8"]:
        service = LocalEmbeddingGenerator(model=model)
        manager = await create_tool_filter(files_kernel, ToolFilterConfig(), embedding_service=service)
        ready = await manager.index.small_talk_ready()
        assert ready is not None and ready.no_tool is not None and ready.tool_request is not None, model
        in_use = np.vstack([ready.no_tool.float32(), ready.tool_request.float32()])
        in_use /= np.linalg.norm(in_use, axis=1, keepdims=True)
        fresh = service.embed_queries_sync(load_exemplars().texts)
        assert np.min(np.sum(in_use * fresh, axis=1)) > 0.99, model  # int8 storage: ~0.9999


async def test_shipped_exemplar_vectors_another_cpu_computed_are_never_used(
    files_kernel, monkeypatch, tmp_path, caplog
):
    # A shipped set whose probe texts disagree with this CPU's encoder (as another CPU's arithmetic
    # would) is left aside: the exemplars are embedded here, and the log says why.
    import logging

    from sk_toolfilter import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval import small_talk
    from sk_toolfilter.retrieval.encoders import embedding_model_id, query_encoder
    from sk_toolfilter.retrieval.numerics import PROBE_TEXTS

    service = LocalEmbeddingGenerator(model="minilm-l2-tools-v1")
    model_id = embedding_model_id(query_encoder(service))
    texts = small_talk.load_exemplars().texts
    fresh = service.embed_queries_sync(texts)
    skewed = fresh.copy()
    probe = [texts.index(t) for t in PROBE_TEXTS]
    skewed[probe[3]] = fresh[probe[3]] * 0.8 + fresh[probe[4]] * 0.2  # one probe text ~0.98 off
    monkeypatch.setattr(small_talk, "VECTORS_DIR", tmp_path)
    small_talk.save_exemplar_vectors(model_id, skewed)
    small_talk.save_exemplar_vectors(model_id, skewed[::-1].copy(), tag="other")
    assert set(small_talk.shipped_exemplar_variants(model_id, 384)) == {"", "other"}
    assert small_talk.matching_variant(small_talk.shipped_exemplar_variants(model_id, 384), fresh[probe]) is None
    with caplog.at_level(logging.INFO, logger="sk_toolfilter"):
        manager = await create_tool_filter(files_kernel, ToolFilterConfig(), embedding_service=service)
        first = await manager.index.small_talk_vectors()
        assert first is not None and first.no_tool is None  # not the shipped sets: embedding here
        ready = await manager.index.small_talk_ready()
    assert ready is not None and ready.no_tool is not None
    assert any("int8 arithmetic differs" in r.getMessage() and model_id in r.getMessage() for r in caplog.records)
    # The same files with the probe rows this CPU computes are used as they are.
    small_talk.save_exemplar_vectors(model_id, fresh, tag="here")
    assert small_talk.matching_variant(small_talk.shipped_exemplar_variants(model_id, 384), fresh[probe]) == "here"
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(), embedding_service=service)
    used = await manager.index.small_talk_vectors()
    assert used is not None and used.no_tool is not None  # at once, no background embedding


async def test_a_request_vector_never_depends_on_what_was_embedded_with_it():
    import numpy as np

    from sk_toolfilter import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.encoders import query_encoder

    requests = ["send an email to bob", "hi", "convert 5 km to miles and then email the result to alice, please"]
    for model in ["minilm-l6-tools-v1", "all-MiniLM-L6-v2-int8"]:
        service = query_encoder(LocalEmbeddingGenerator(model=model))
        together = np.asarray(await service.generate_embeddings(requests))
        for i, request in enumerate(requests):  # alone, and beside other (longer) requests: the same vector
            alone = np.asarray(await service.generate_embeddings([request]))[0]
            beside = np.asarray(await service.generate_embeddings([request, "a much longer request " * 20]))[0]
            assert np.array_equal(alone, together[i]) and np.array_equal(alone, beside), (model, request)


async def test_a_model_without_shipped_exemplar_vectors_embeds_them_once_and_judges_alike(files_kernel):
    from sk_toolfilter import LocalEmbeddingGenerator
    from sk_toolfilter.retrieval.small_talk import load_exemplars

    calls: list[int] = []
    service = LocalEmbeddingGenerator(model="all-MiniLM-L6-v2-int8")
    service.ai_model_id = "general-under-another-name"  # so that no shipped vectors match it
    encoder = service.query_encoder.encoder  # one encoder embeds tools and requests: count what it embeds
    embed = encoder.embed
    encoder.embed = lambda texts, **options: (calls.append(len(texts)), embed(texts, **options))[1]
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(), embedding_service=service)
    request = "do you keep any pets at home?"  # three subject words: only an exemplar can tell
    first = await manager.index.small_talk_vectors()
    assert first is not None and first.no_tool is None  # embedding in the background; descriptions judge
    ready = await manager.index.small_talk_ready()
    assert ready is not None and ready.no_tool is not None
    before = sum(calls)
    for text in [request, "are you a robot?", "who is your creator?"]:
        assert set(await manager.filter_tools(text)) == DISCOVERY, text
    assert sum(calls) - before <= 3  # each request's own vector; the exemplars were embedded once
    assert sum(calls) < len(load_exemplars().texts) + 200
    assert "Weather-forecast" in await manager.filter_tools("what's the forecast?")


async def test_aclose_returns_once_the_exemplar_embedding_has_stopped(files_kernel):
    from sk_toolfilter import LocalEmbeddingGenerator

    service = LocalEmbeddingGenerator(model="all-MiniLM-L6-v2-int8")
    service.ai_model_id = "general-under-another-name"  # no shipped vectors: embedded in the background
    manager = await create_tool_filter(files_kernel, ToolFilterConfig(), embedding_service=service)
    await manager.index.small_talk_vectors()
    task = manager.index._exemplar_task
    assert task is not None and not task.done()  # created by that call, not yet run
    await manager.aclose()
    assert task.done()
