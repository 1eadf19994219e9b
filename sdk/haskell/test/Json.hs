-- | Just enough JSON (parsec, from the compiler's packages) to read
-- proto/vectors: integers stay exact ('Integer'), as PROTOCOL.md 8 asks.
module Json (Json (..), parseJson, (.:), str, int, list) where

import Data.Char (chr)
import Numeric (readHex)
import Text.Parsec
import Text.Parsec.String (Parser)

data Json = JNull | JBool Bool | JNum Integer | JStr String | JArr [Json] | JObj [(String, Json)]
  deriving (Eq, Show)

parseJson :: String -> Either ParseError Json
parseJson = parse (spaces *> value <* eof) "json"

value :: Parser Json
value = (obj <|> arr <|> (JStr <$> stringLit) <|> number <|> lit) <* spaces
  where
    obj = JObj <$> (char '{' *> spaces *> (pair `sepBy` (char ',' *> spaces)) <* char '}')
    pair = (,) <$> (stringLit <* spaces <* char ':' <* spaces) <*> value
    arr = JArr <$> (char '[' *> spaces *> (value `sepBy` (char ',' *> spaces)) <* char ']')
    number = do
      sign <- option "" (string "-")
      digits <- many1 digit
      pure (JNum (read (sign ++ digits)))
    lit = (JNull <$ string "null") <|> (JBool True <$ string "true") <|> (JBool False <$ string "false")

stringLit :: Parser String
stringLit = char '"' *> many ch <* char '"'
  where
    ch = noneOf "\"\\" <|> (char '\\' *> esc)
    esc = choice
      [ '"' <$ char '"', '\\' <$ char '\\', '/' <$ char '/', '\n' <$ char 'n', '\t' <$ char 't'
      , '\r' <$ char 'r', '\b' <$ char 'b', '\f' <$ char 'f'
      , char 'u' *> (chr . fst . head . readHex <$> count 4 hexDigit) ]

(.:) :: Json -> String -> Json
JObj kvs .: k = maybe (error ("no key " ++ k)) id (lookup k kvs)
_ .: k = error ("not an object, looking for " ++ k)

str :: Json -> String
str (JStr s) = s
str j = error ("not a string: " ++ show j)

int :: Num a => Json -> a
int (JNum n) = fromInteger n
int j = error ("not a number: " ++ show j)

list :: Json -> [Json]
list (JArr xs) = xs
list j = error ("not a list: " ++ show j)
