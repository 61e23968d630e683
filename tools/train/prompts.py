"""How users phrase their turns, for gen.py: paraphrase templates per intent and
a surface layer (polite wrappers, context words, casing, punctuation, rare
typos), all drawn from the caller's Random (deterministic by seed).

Why (PLAN.md "Diagnosis at step 1257", item 5; "Prompt variety (gen26)"): the
model at step 1800 answered held-out phrasings of known intents with another
intent's answer ("Can you tell me a joke?" -> a story, from "Can you tell me a
story?"): it keyed on a handful of fixed strings per intent. Here each intent
has many phrasings, and `say` perturbs their surface the way people type, so
the intent and not the exact string has to decide the answer.

A template is a str.format string; its slots ({n}, {w}, ...) are filled after
the typo pass, so a typo never lands in a country's or a word's name. The first
template of each list is the plain, canonical form (gen.py's phrasings before
gen26) and keeps a fixed share (`CANON_P`): held-out prompts are plain too.
"""
from __future__ import annotations

import re

CANON_P = 0.35          # share of prompts taken as the plain form, untouched
WRAP_P = 0.22           # a polite wrapper or context words around the question
TYPO_P = 0.04           # one typo in the template's own words

# ---- templates per intent (first lists: the pre-gen26 phrasings) ----

GREET = ["Hello!", "Hi!", "Hi there!", "Hey!", "Good morning!", "Good evening!", "Hello there!",
         "Hey there!", "Good afternoon!", "Hiya!", "Greetings!", "Hello, Clover!", "Hi Clover!",
         "Hey Clover, hi!", "Howdy!", "Hello, friend!", "Yo!", "Good day!", "Morning!", "Hi, nice to meet you!"]
HOW = ["Hello, how are you?", "How are you doing?", "How are you?", "How's it going?",
       "How are you today?", "How do you do?", "How have you been?", "What's up?", "Are you doing well?",
       "How is your day going?", "How are things?", "How are you feeling today?"]
WHO = ["Who are you?", "What is your name?", "What are you?", "Tell me about yourself.",
       "Are you a robot?", "What's your name?", "Who am I talking to?", "Introduce yourself.",
       "Are you a human?", "Are you an AI?", "What should I call you?", "Who made you?",
       "Do you have a name?", "Can you introduce yourself?", "Are you a person or a computer?",
       "Who is this?", "What kind of model are you?", "Tell me who you are.", "Who are you exactly?"]
CAN = ["What can you do?", "How can you help me?", "What are you good at?", "What do you know about?",
       "What can I ask you?", "What kind of questions can you answer?", "What can you help me with?",
       "What are you able to do?", "What topics do you know?"]
THANKS = ["Thank you!", "Thanks a lot.", "Thanks!", "Thank you so much!", "Thanks for your help.",
          "Thank you very much.", "Thanks, that was helpful!", "Thank you, that helps a lot.",
          "Many thanks!", "Thanks for the answer!", "Great, thank you!", "Thx!", "Thank you for that!",
          "Cheers, thanks!", "Thanks, you are very helpful.", "Thank you for helping me!",
          "I appreciate your help, thanks.", "Awesome, thanks a lot!", "Thanks for explaining."]
BYE = ["Goodbye!", "See you later!", "Bye!", "Bye bye!", "See you!", "Good night!", "Talk to you later!",
       "I have to go now. Bye!", "That's all for today, goodbye!", "Have a nice day, bye!"]

CAPITAL = ["What is the capital of {n}?", "What's the capital city of {n}?", "Which city is the capital of {n}?",
           "Tell me the capital of {n}.", "capital of {n}?", "What's the capital of {n}?",
           "What is {n}'s capital?", "Which city is {n}'s capital?", "Do you know the capital of {n}?",
           "Name the capital of {n}.", "What city is the capital of {n}?", "What is the capital city of {n}?",
           "Could you tell me the capital of {n}?", "I'd like to know the capital of {n}.",
           "What's {n}'s capital city?", "Where is the government of {n}?", "The capital of {n} is what?",
           "Can you tell me what the capital of {n} is?", "{n}: what is its capital?",
           "I forgot the capital of {n}. What is it?"]
WHERE = ["Where is {n}?", "In which part of the world is {n}?", "Where is {n} located?",
         "Which continent is {n} in?", "What region is {n} in?", "Where in the world is {n}?",
         "Where can I find {n} on a map?", "Can you tell me where {n} is?", "Is {n} in Europe, Asia or somewhere else?",
         "Where exactly is {n}?", "What part of the world is {n} in?"]
LANG = ["What language do people speak in {n}?", "What languages are spoken in {n}?",
        "Which language is spoken in {n}?", "What do people speak in {n}?",
        "What's the official language of {n}?", "What language do they speak in {n}?",
        "Which languages do people in {n} speak?", "What is the main language of {n}?",
        "What language is spoken in {n}?", "If I go to {n}, what language will I hear?",
        "Do people in {n} speak English?", "What is the language of {n}?", "Language of {n}?",
        "Which language do they use in {n}?", "Tell me what language people speak in {n}."]
MONEY = ["What is the currency of {n}?", "What money do they use in {n}?", "Which currency is used in {n}?",
         "What currency does {n} use?", "What's the official currency of {n}?",
         "What do people in {n} pay with?", "Which currency do they use in {n}?",
         "If I travel to {n}, what money do I need?", "What is the money of {n} called?",
         "What currency is used in {n}?", "Currency of {n}?", "What kind of money does {n} have?",
         "Tell me the currency of {n}.", "What's the money in {n}?"]
BORDERS = ["Which countries border {n}?", "What are the neighbours of {n}?", "Which countries are next to {n}?",
           "What countries border {n}?", "Which countries share a border with {n}?",
           "What are {n}'s neighbors?", "What countries are next to {n}?", "Name the neighbours of {n}.",
           "Which countries surround {n}?", "What are the neighboring countries of {n}?",
           "Which countries does {n} border?", "Does {n} have any neighbours?",
           "List the countries that border {n}.", "What countries is {n} next to?"]
ABOUT = ["Tell me about {n}.", "What do you know about {n}?", "Describe {n}.", "Tell me something about {n}.",
         "Can you tell me about {n}?", "What can you tell me about {n}?", "Give me some facts about {n}.",
         "I'd like to learn about {n}.", "What is {n} like?", "Tell me a bit about the country {n}.",
         "I want to know about {n}.", "Some facts about {n}, please.", "What is {n}?",
         "Give me a short profile of {n}.", "I'm going to visit {n}. What should I know about it?"]

PERSON = ["Who was {t}?", "Who is {t}?", "Tell me about {t}.", "What do you know about {t}?",
          "Can you tell me who {t} was?", "Do you know who {t} is?", "Tell me something about {t}.",
          "What is {t} known for?", "What was {t} famous for?", "I'd like to know more about {t}.",
          "Who exactly was {t}?", "Give me a short summary of {t}.", "Have you heard of {t}?",
          "Why is {t} famous?", "Can you tell me about {t}?"]
THING = ["What is {t}?", "Tell me about {t}.", "What do you know about {t}?", "Can you explain {t}?",
         "What's {t}?", "Explain {t}.", "Describe {t}.", "What can you tell me about {t}?",
         "I want to learn about {t}.", "Give me an overview of {t}.", "Tell me something about {t}.",
         "Do you know what {t} is?", "Could you explain {t} to me?", "What exactly is {t}?"]

DEFINE = ['What does "{w}" mean?', 'Define the word "{w}".', 'What is the meaning of "{w}"?',
          'What does the word "{w}" mean?', 'Define "{w}".', "What does {w} mean?",
          'Can you explain the word "{w}"?', 'What\'s the meaning of the word "{w}"?',
          'What is the definition of "{w}"?', "Give me the definition of {w}.", 'Meaning of "{w}"?',
          'Explain what "{w}" means.', 'Can you define "{w}"?', "Define {w}.",
          'I don\'t know the word "{w}". What does it mean?', 'What does the word {w} mean?',
          "What's the definition of {w}?", 'Look up the word "{w}" for me.', '"{w}": what does that mean?',
          "What is the meaning of the word '{w}'?", "What does '{w}' mean?",
          'I read the word "{w}" in a book. What does it mean?', 'Could you tell me what "{w}" means?',
          'What do people mean when they say "{w}"?', 'Please define the word "{w}".']
DEFINE_NOUN = ['What is a "{w}"?', "What is {aw}?", "What's {aw}?"]
DEFINE_VERB = ['What does it mean to "{w}"?', "What does it mean to {w}?"]

ADD = ["What is {x} plus {y}?", "What is {x} + {y}?", "Add {x} and {y}.", "How much is {x} plus {y}?",
       "What's {x} plus {y}?", "{x} + {y} = ?", "{x}+{y}", "Calculate {x} + {y}.", "Can you add {x} and {y}?",
       "What do you get if you add {x} and {y}?", "What is the sum of {x} and {y}?",
       "Please work out {x} plus {y}.", "{x} plus {y}?", "What is {x} and {y} added together?",
       "If I have {x} apples and get {y} more, how many apples do I have?", "Compute {x} + {y}.",
       "What does {x} plus {y} equal?", "How much do {x} and {y} make together?", "Sum of {x} and {y}?"]
SUB = ["What is {x} minus {y}?", "What is {x} - {y}?", "Subtract {y} from {x}.", "What's {x} minus {y}?",
       "{x} - {y} = ?", "{x}-{y}", "Take {y} away from {x}.", "What is {x} take away {y}?",
       "What do you get if you subtract {y} from {x}?", "Calculate {x} - {y}.", "How much is {x} minus {y}?",
       "If I have {x} coins and spend {y}, how many are left?", "What does {x} minus {y} equal?",
       "Can you subtract {y} from {x}?", "{x} minus {y}?"]
MUL = ["What is {x} times {y}?", "What is {x} x {y}?", "Multiply {x} by {y}.", "How much is {x} times {y}?",
       "What's {x} times {y}?", "What is {x} multiplied by {y}?", "{x} * {y} = ?", "{x}*{y}",
       "What is {x} * {y}?", "What is the product of {x} and {y}?", "Calculate {x} times {y}.",
       "Can you multiply {x} by {y}?", "What do you get if you multiply {x} by {y}?",
       "{x} times {y}?", "What does {x} times {y} equal?", "How much are {y} groups of {x}?"]

STORY_ANIMAL = ["Tell me a short story about {aan}.", "Tell me a story about {aadj} {an}.",
                "Write a short story about {name} the {an}.", "Write a story about {aan} who finds {o}.",
                "Tell me a story about {aan} and {aa2}.", "Can you tell me a story about {aan}?",
                "I'd like a story about {aan}.", "Write me a story about {aan}.",
                "Please tell me a short story about {aadj} {an}.", "Could you write a short story about {aan}?",
                "Make up a story about {aan} named {name}.", "Tell me a tale about {aadj} {an}.",
                "Story about {aan}, please.", "My little sister wants a story about {aan}.",
                "Write a bedtime story about {aadj} {an}.", "Tell me a short story about {aadj} {an}.",
                "Can you write a story about {aan} and its friend the {a2}?",
                "Tell me a story where {aan} finds {o}.", "Write a short story about {aadj} {an}.",
                "I want to hear a story about {aan}."]
STORY_PLAIN = ["Tell me a bedtime story.", "Can you tell me a story?", "Tell me a short story.",
               "Tell me a story.", "Write a short story.", "Could you tell me a story?", "I'd like to hear a story.",
               "Tell me a story, please.", "Write me a little story.", "Do you know any stories?",
               "Make up a story for me.", "Can you write a short story for me?", "Story time! Tell me one."]
STORY_KID = ["Write a short story about a {kid} and {p} {an}.", "Tell me a story about a {kid} and {p} {an}.",
             "Tell me a story about a {kid} who has {aan}.", "Write a story about a {kid} named {name} and {p} {an}.",
             "Can you tell me a story about a {kid} and {aan}?", "Write a short story about {aadj} {kid}."]

JOKE = ["Tell me a joke.", "Do you know any jokes?", "Tell me something funny.", "Make me laugh.",
        "Do you know a good joke?", "Could you tell me a joke?", "Say something funny.", "Tell me a funny joke.",
        "I need a laugh. Tell me a joke.", "Know any good jokes?", "Tell me a joke, please.", "Got a joke for me?",
        "Can you tell me a funny joke?", "Give me a joke.", "Tell me your best joke.", "Can you make me laugh?",
        "Tell me a silly joke.", "Tell me a joke for kids.", "I'm bored. Tell me a joke."]
RIDDLE = ["Tell me a riddle.", "Do you know a riddle?", "Give me a riddle.", "Can you tell me a riddle?",
          "Do you have a riddle for me?", "Ask me a riddle."]
QUOTE = ["Tell me a quote.", "Give me a quote.", "Say something wise.", "Tell me a funny saying.",
         "Do you know a good quote?", "Share a quote with me.", "Tell me a famous quote.",
         "Give me an inspiring quote.", "Do you have a favourite quote?", "Tell me a wise saying.",
         "Can you share a quote?", "I'd like a quote, please."]
# a second country question in a conversation, leaning on the first (gen.py multi)
FOLLOW = {"capital": ["And what about {n}?", "And the capital of {n}?", "What about {n}?", "And {n}?",
                      "How about {n}?", "And what is the capital of {n}?", "Ok. And {n}?"],
          "where": ["And where is {n}?", "What about {n}?", "And {n}?", "How about {n}?"],
          "borders": ["And which countries border {n}?", "What about {n}?", "And {n}, what are its neighbours?",
                      "And {n}?"],
          "about": ["And {n}?", "Now tell me about {n}.", "What about {n}?", "And what do you know about {n}?"]}

# ---- the surface layer ----

POLITE_Q = ["Could you tell me: {q}", "Quick question: {q}", "I have a question. {q}", "Hey, {q}",
            "Hi! {q}", "Hello! {q}", "{q} Thanks!", "{q} Thank you.", "I was wondering, {l}",
            "I'm curious: {q}", "Can I ask you something? {q}", "Please answer this: {q}",
            "Sorry to bother you, but {l}", "Hello Clover. {q}", "My teacher asked us this: {q}",
            "For my homework: {q}", "I'd like to know something. {q}", "Do you know this? {q}",
            "Help me with this one: {q}", "{q} I really want to know.", "Just wondering, {l}",
            "OK, next question. {q}", "Here is a question for you. {q}", "{q} Please answer briefly."]
POLITE_IMP = ["Please {l}", "Could you please {l}", "Can you {l}", "{b}, please.", "Would you {l}",
              "Hey, {l}", "Hi! {q}", "{q} Thanks!", "I'd like you to {l}", "Hello Clover. {q}",
              "{q} Thank you.", "Please, {l}", "Can you please {l}"]
IMPERATIVE = {"tell", "write", "give", "define", "describe", "add", "subtract", "multiply", "share", "say",
              "explain", "name", "list", "make", "take", "calculate", "compute", "introduce", "look"}
CONTEXT_WORD = re.compile(r"^(hello|hi|hey|please|thanks?|thank)\b", re.I)
KEYS = "qwertyuiopasdfghjklzxcvbnm"


def _typo(r, text: str) -> str:
    """One typo in one word of 4+ letters outside slots: swap, drop, double or a neighbour key."""
    parts = re.split(r"(\{[a-z0-9]+\}|[A-Za-z]{4,})", text)
    idx = [i for i, p in enumerate(parts) if p and p[0] != "{" and p.isalpha() and len(p) >= 4]
    if not idx:
        return text
    i = r.choice(idx)
    w = parts[i]
    j = r.randrange(1, len(w) - 1)
    k = r.randrange(4)
    if k == 0:
        w = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    elif k == 1:
        w = w[:j] + w[j + 1:]
    elif k == 2:
        w = w[:j] + w[j] + w[j:]
    else:
        w = w[:j] + r.choice(KEYS.replace(w[j].lower(), "")) + w[j + 1:]
    if w == parts[i]:                       # swapped two equal letters: drop one instead
        w = w[:j] + w[j + 1:]
    parts[i] = w
    return "".join(parts)


def _lower_first(q: str) -> str:
    # keep "I", names and quoted words: lower only an ordinary first word
    first = q.split(" ", 1)[0]
    if first in ("I", "I'd", "I'm") or not first[:1].isupper() or (len(first) > 1 and first[1:2].isupper()):
        return q
    return q[0].lower() + q[1:]


def _wrap(r, q: str) -> str:
    first = re.sub(r"[^a-z]", "", q.split(" ", 1)[0].lower())
    if CONTEXT_WORD.match(q) or "please" in q.lower():
        return q
    if first in IMPERATIVE:
        l = _lower_first(q)
        b = q.rstrip(".!?")
        t = r.choice(POLITE_IMP)
        if t.startswith(("Can you", "Could you", "Would you")) and l.endswith("."):
            l = l[:-1] + "?"
        return t.format(q=q, l=l, b=b)
    return r.choice(POLITE_Q).format(q=q, l=_lower_first(q))


def _surface(r, q: str) -> str:
    u = r.random()
    if u < 0.10:
        q = q.lower()
    elif u < 0.11 and len(q) < 40:
        q = q.upper()
    u = r.random()
    if u < 0.12:
        q = q.rstrip(".!?")
    elif u < 0.15 and q.endswith("?"):
        q = q + r.choice(["?", "??", " :)"])
    elif u < 0.17 and q.endswith("."):
        q = q[:-1] + "!"
    return q


def say(r, templates: list[str], **slots) -> str:
    """One user turn from `templates` with `slots` filled; canonical and clean at CANON_P."""
    if r.random() < CANON_P:
        return templates[0].format(**slots) if r.random() < 0.5 else r.choice(templates).format(**slots)
    t = r.choice(templates)
    if r.random() < TYPO_P:
        t = _typo(r, t)
    q = t.format(**slots)
    if r.random() < WRAP_P:
        q = _wrap(r, q)
    return _surface(r, q)
