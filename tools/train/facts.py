"""Our own small answer tables for gen.py's intents that the source pack does
not cover (gen26): other phrasings of the "why" questions, a few more
explanations, record facts ("the biggest animal"), jokes, and questions that a
small offline model cannot answer.

Why: at step 1800 a question outside the generator's intents got a confident
answer from the nearest intent ("What is the biggest animal in the world?" ->
the currency of Spain). The model should rather see honest answers in a fixed
shape: a short fact with a sentence of context, or "I don't know that" with
what it can do instead. All text here is ours; facts are stable ones.
"""
from __future__ import annotations

# other phrasings of gen.WHY's questions (the key is WHY's question)
WHY_ALT = {
    "Why do leaves change color in autumn?": ["Why do leaves turn yellow and red in the fall?",
                                              "What makes leaves change colour in autumn?",
                                              "Why do trees lose their green color in autumn?"],
    "Why does ice float on water?": ["How come ice floats?", "Why doesn't ice sink in water?",
                                     "What makes ice float on water?"],
    "Why do we need to sleep?": ["Why do people have to sleep?", "What is sleep good for?",
                                 "Why do humans need sleep?"],
    "Why is the ocean salty?": ["Why is sea water salty?", "How did the sea get salty?",
                                "What makes the ocean salty?"],
    "Why does it rain?": ["Where does rain come from?", "What causes rain?", "How does rain happen?"],
    "Why does the moon change shape?": ["Why does the moon look different every night?",
                                        "What are the phases of the moon?", "Why is the moon sometimes a crescent?"],
    "Why do cats purr?": ["What does it mean when a cat purrs?", "How do cats purr?", "Why does my cat purr?"],
    "Why do we have seasons?": ["What causes the seasons?", "Why is it cold in winter and warm in summer?",
                                "Why are there four seasons?"],
    "How do plants grow?": ["What do plants need to grow?", "How does a plant grow?", "How do seeds become plants?"],
    "Why do birds fly south in winter?": ["Why do birds migrate?", "Where do birds go in winter?",
                                          "Why do some birds leave in the autumn?"],
    "What makes thunder?": ["What causes thunder?", "Why is there thunder after lightning?",
                            "Where does the sound of thunder come from?"],
    "Why do we brush our teeth?": ["Why should I brush my teeth?", "Why is brushing your teeth important?",
                                   "What happens if you don't brush your teeth?"],
    "Why is exercise good for you?": ["Why should I exercise?", "What are the benefits of exercise?",
                                      "Is exercise good for your health?"],
    "How does a rainbow form?": ["How are rainbows made?", "Why do we see rainbows?", "What makes a rainbow?"],
    "Why do we have day and night?": ["Why is it dark at night?", "What causes day and night?",
                                      "Why does the sun go down?"],
    "Why does bread rise?": ["What makes bread dough rise?", "How does yeast make bread rise?",
                             "Why does dough get bigger?"],
}

# more explanations: (phrasings, answer); none is a held-out prompt verbatim
WHY_MORE = [
    (["What makes the sky blue?", "Why does the sky look blue?", "Why is the sky blue during the day?",
      "How come the sky is blue?", "What gives the sky its blue color?"],
     "The sky looks blue because of the way sunlight moves through the air. Sunlight is made of many "
     "colors. When it passes through the air, the tiny gas particles scatter blue light much more than "
     "red or yellow light, so blue light reaches our eyes from every part of the sky. At sunset the light "
     "travels through more air, the blue is scattered away, and the sky turns orange and red."),
    (["Why is grass green?", "What makes plants green?", "Why are leaves green?"],
     "Grass and leaves are green because they are full of chlorophyll. Chlorophyll takes in red and blue "
     "light from the sun and uses its energy to make food for the plant. It does not use much green light, "
     "so the green light bounces back to our eyes. That is why most plants look green."),
    (["Why do stars twinkle?", "What makes stars twinkle at night?", "Why do the stars seem to flicker?"],
     "Stars twinkle because their light passes through the moving air around the Earth. The air has warm "
     "and cold layers that bend the light a little, and they keep moving. A star is so far away that it "
     "looks like a tiny point, so these small bends make it seem to flicker. Planets are closer and look "
     "bigger, so they twinkle much less."),
    (["Why is the sun hot?", "How does the sun make heat?", "Why does the sun shine?"],
     "The sun is hot because deep inside it, tiny parts of hydrogen are pressed together so hard that they "
     "join and become helium. This gives off a huge amount of energy as heat and light. The energy travels "
     "out through the sun and into space. Some of it reaches the Earth after about eight minutes and keeps "
     "our planet warm."),
    (["Why do we yawn?", "What makes people yawn?", "Why is yawning contagious?"],
     "Nobody knows for sure why we yawn. Scientists think a yawn may help cool the brain or help us stay "
     "alert when we are tired or bored. Yawning is also catching: when we see someone yawn, we often yawn "
     "too. People, cats, dogs and many other animals yawn, so it is a very old habit."),
    (["Why is snow white?", "What makes snow white?", "Why does snow look white?"],
     "Snow is white because it is made of many tiny ice crystals with lots of air between them. Each "
     "crystal is clear, but light bounces off all their small faces in every direction. All the colors "
     "of sunlight are bounced back together, and all colors mixed look white. That is why snow looks "
     "white even though ice is clear."),
    (["Why do we have to eat vegetables?", "Why are vegetables good for you?", "Why should I eat my vegetables?"],
     "Vegetables are good for you because they are full of vitamins, minerals and fiber that the body "
     "needs. Vitamins help you grow and fight off illness, minerals keep your bones and blood healthy, and "
     "fiber helps your stomach work well. Eating many kinds of vegetables every day helps you stay strong "
     "and healthy."),
    (["How do airplanes fly?", "How does a plane stay in the air?", "Why can airplanes fly?"],
     "Airplanes fly because of the shape of their wings. When the plane moves fast, air flows over and "
     "under the wings. The wings are shaped and tilted so that they push air down, and the air pushes the "
     "wings up. This push is called lift. The engines keep the plane moving forward, so the wings keep "
     "making lift and the plane stays in the air."),
]

# record facts: (phrasings, answer)
FACTS = [
    (["What is the largest animal in the world?", "What's the biggest animal on Earth?",
      "Which animal is the biggest?", "What is the largest animal that has ever lived?",
      "Which is the biggest animal alive?", "What's the largest animal?", "What animal is the biggest in the world?"],
     "The largest animal in the world is the blue whale. It lives in the ocean and can grow to about 30 "
     "meters long, longer than two buses, and weigh as much as 150 tonnes. It is the largest animal "
     "that has ever lived, bigger than any dinosaur. Even so, it eats tiny sea animals called krill."),
    (["What is the biggest land animal?", "Which land animal is the largest?", "What's the largest animal on land?"],
     "The biggest land animal is the African elephant. A grown male can stand about 3 meters tall at the "
     "shoulder and weigh around 6 tonnes. Elephants eat grass, leaves and fruit, and they live in family "
     "groups led by an older female."),
    (["What is the tallest animal?", "Which animal is the tallest in the world?", "What's the tallest animal?"],
     "The tallest animal is the giraffe. A grown giraffe can be more than 5 meters tall, and most of that "
     "height is its long neck and legs. Its height lets it eat leaves from the tops of trees that other "
     "animals cannot reach."),
    (["What is the fastest animal on land?", "Which animal runs the fastest?", "What's the fastest land animal?"],
     "The fastest land animal is the cheetah. It can run at about 100 kilometers an hour, but only for a "
     "short time. Cheetahs live in Africa and use their speed to catch their food. A long tail helps them "
     "turn quickly while they run."),
    (["What is the biggest ocean?", "Which ocean is the largest?", "What's the largest ocean in the world?"],
     "The biggest ocean is the Pacific Ocean. It lies between Asia and Australia on one side and the "
     "Americas on the other, and it covers about a third of the Earth's surface. It is also the deepest "
     "ocean."),
    (["What is the highest mountain in the world?", "Which mountain is the tallest?",
      "What's the tallest mountain on Earth?", "How high is the highest mountain?"],
     "The highest mountain in the world is Mount Everest. Its top is about 8,849 meters above the sea. It "
     "stands in the Himalayas, on the border between Nepal and China. The air at the top is so thin that "
     "most climbers carry extra oxygen."),
    (["What is the biggest planet?", "Which planet is the largest?", "What's the largest planet in our solar system?"],
     "The biggest planet in our solar system is Jupiter. It is so large that more than a thousand Earths "
     "could fit inside it. Jupiter is a giant ball of gas with no solid ground, and it has a huge storm "
     "called the Great Red Spot."),
    (["What is the biggest country in the world?", "Which country is the largest?",
      "What's the largest country by area?"],
     "The biggest country in the world by area is Russia. It stretches across eastern Europe and northern "
     "Asia and covers about one eighth of all the land on Earth. It is so wide that it has eleven time "
     "zones."),
    (["What is the smallest country in the world?", "Which country is the smallest?",
      "What's the tiniest country?"],
     "The smallest country in the world is Vatican City. It lies inside the city of Rome, in Italy, and "
     "it is smaller than many parks. It is the home of the Pope, the leader of the Catholic Church."),
    (["What is the longest river in the world?", "Which river is the longest?", "What's the longest river?"],
     "The longest river in the world is the Nile, in Africa, at about 6,650 kilometers. The Amazon, in "
     "South America, is almost as long, and some people measure it as longer. The Amazon carries far more "
     "water than any other river."),
    (["How many continents are there?", "What are the continents?", "Can you name the continents?"],
     "There are seven continents: Africa, Antarctica, Asia, Australia, Europe, North America and South "
     "America. Asia is the biggest and has the most people. Antarctica is the coldest, and almost nobody "
     "lives there."),
    (["What is the biggest bird?", "Which bird is the largest?", "What's the largest bird in the world?"],
     "The biggest bird in the world is the ostrich. It can be taller than a grown man and weigh more than "
     "100 kilograms. Ostriches cannot fly, but they run very fast on their long, strong legs."),
    (["How many days are in a year?", "How long is a year?", "How many days does a year have?"],
     "A year has 365 days. Every fourth year is a leap year with 366 days, because the Earth takes about "
     "365 and a quarter days to travel once around the sun. The extra day is added at the end of "
     "February."),
]

# intents the model cannot answer: (phrasings, why not)
UNKNOWN = [
    (["What time is it?", "What's the time right now?", "Can you tell me the time?", "What is today's date?",
      "What day is it today?"], "I have no clock and cannot see the date"),
    (["What is the weather like today?", "Will it rain tomorrow?", "What's the weather in {city}?",
      "Is it cold in {city} right now?", "What will the weather be this weekend?"],
     "I cannot look outside or check a weather service"),
    (["What's the latest news?", "What happened in the world today?", "Who won the game last night?",
      "What is the news in {n}?", "Who won the last election in {n}?"],
     "I do not read the news, and I only know what I learned during training"),
    (["How much is a bitcoin worth?", "What is the price of gold today?", "How much does a flight to {n} cost?",
      "What is the exchange rate of the dollar today?"],
     "prices change every day and I cannot look them up"),
    (["What is my name?", "How old am I?", "Where do I live?", "What did I have for breakfast?",
      "Do you remember me?"], "I do not know anything about you unless you tell me"),
    (["Who will win the next World Cup?", "What will happen next year?", "Will I be rich one day?",
      "What are the lottery numbers for this week?"], "nobody can know the future, and I cannot either"),
    (["Who is the richest person in the world?", "What is the tallest building in the world?",
      "Who is the president of {n} now?", "How many people live in {city} today?"],
     "that changes over time and what I learned may be out of date"),
    (["Can you play a song for me?", "Can you send an email for me?", "Can you set an alarm?",
      "Can you book a table at a restaurant?", "Can you call my mom?"], "I can only write text"),
    (["What is the best phone to buy?", "Which football team is the best?", "Who is the best singer ever?",
      "What is the best movie of all time?"], "that is a matter of taste, and I have no good way to judge it"),
    (["Why do dogs wag their tails?", "Why do zebras have stripes?", "Why do onions make you cry?",
      "How do magnets work?", "Why do we dream?", "How does the internet work?", "Why do we get hiccups?"],
     "I do not know enough about that to explain it well, and I would rather not guess"),
    (["How far is the moon?", "How old is the universe?", "How many stars are in the sky?",
      "How deep is the ocean?"], "I do not know the exact figure, and I would rather not make one up"),
]

# our own jokes: (setup, punchline, why it is funny)
JOKES = [
    ("Why did the chicken cross the road?", "To get to the other side!",
     "It is funny because you expect a clever reason, and the answer is the most obvious one."),
    ("What do you call a bear with no teeth?", "A gummy bear!",
     "A bear with no teeth would only have gums, and gummy bears are also a kind of sweet."),
    ("Why did the scarecrow win an award?", "Because he was outstanding in his field!",
     "A scarecrow really stands out in a field, and being outstanding in your field means being very good at your job."),
    ("What do you call a fish with no eyes?", "A fsh!",
     "Take the letter i out of the word fish, and you get fsh."),
    ("Why don't eggs tell jokes?", "Because they would crack each other up!",
     "To crack up means to laugh a lot, and eggs also crack."),
    ("What has four wheels and flies?", "A garbage truck!",
     "You expect something that flies in the sky, but the flies here are the insects around the garbage."),
    ("Why was the math book sad?", "Because it had too many problems!",
     "A math book is full of problems to solve, and a person with many problems is sad."),
    ("What do you call a sleeping dinosaur?", "A dino-snore!",
     "It sounds like dinosaur, and a sleeping animal snores."),
    ("Why can't a bicycle stand up by itself?", "Because it is two tired!",
     "Two tired sounds like too tired, and a bicycle has two tires."),
    ("What did the ocean say to the beach?", "Nothing, it just waved!",
     "Oceans make waves, and people wave hello."),
    ("Why did the cookie go to the doctor?", "Because it felt crummy!",
     "Cookies make crumbs, and feeling crummy means feeling bad."),
    ("What do you call a cow with no legs?", "Ground beef!",
     "A cow without legs would sit on the ground, and ground beef is also a kind of meat."),
    ("Why do cows wear bells?", "Because their horns don't work!",
     "A car has a horn to make noise, and a cow has horns too, but they cannot honk."),
    ("What kind of tree fits in your hand?", "A palm tree!",
     "A palm is a kind of tree, and it is also the inside of your hand."),
    ("Why did the student eat his homework?", "Because the teacher said it was a piece of cake!",
     "A piece of cake means something very easy, but the student took it literally."),
    ("What do you call a dog that does magic?", "A labracadabrador!",
     "It mixes the dog called a labrador with abracadabra, the word magicians say."),
]
